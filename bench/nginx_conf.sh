# Sourced by the benches that put nginx beside ecopt (bench_service.sh,
# bench_p99.sh): nginx_conf DIR WORKERS PORT ROOT writes DIR/nginx.conf,
# a static server of ROOT on 127.0.0.1:PORT with WORKERS worker processes,
# every path it writes inside DIR; free_port prints a free loopback port
# (nginx cannot report a port 0 binding).
nginx_conf() {
    cat >"$1/nginx.conf" <<NGX
worker_processes $2;
pid $1/nginx.pid;
error_log $1/error.log;
daemon off;
events { worker_connections 1024; }
http {
    access_log off;
    default_type application/json;
    client_body_temp_path $1;
    proxy_temp_path $1;
    fastcgi_temp_path $1;
    uwsgi_temp_path $1;
    scgi_temp_path $1;
    server { listen 127.0.0.1:$3; root $4; }
}
NGX
}
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
