/*
 * ecopt dashboard: plain JavaScript, no build step, no dependency.
 * Pages (hash routes): #/ jobs, #/jobs/ID a job with its live chart,
 * #/experiments/ID an experiment compared, #/submit the forms.
 * Every request carries the token from sessionStorage as a bearer header;
 * the live chart reads the event stream with fetch() so the token never
 * goes into a URL. Text from the API is only ever set as textContent.
 */
'use strict';

(function () {
    const TOKEN_KEY = 'ecopt.token';
    const FINAL = ['succeeded', 'failed', 'cancelled', 'interrupted'];
    const ALGORITHMS = ['eclk', 'lkatyusha', 'ec-sgd', 'ec-gd', 'ec-lsvrg', 'ec-sgd-diana',
                        'ec-gd-diana', 'ef21', 'gd', 'sgd'];
    const COMPRESSORS = ['topk', 'randk', 'randk-unbiased', 'dither', 'none'];
    const X_AXES = {rounds: 'communication rounds', bits: 'bits sent up per worker',
                    seconds: 'seconds'};
    const SVGNS = 'http://www.w3.org/2000/svg';

    /* ---- small helpers ---- */

    function el(tag, attrs) {
        const e = document.createElement(tag);
        for (const k in attrs || {}) {
            const v = attrs[k];
            if (v === undefined || v === null || v === false) continue;
            if (k === 'text') e.textContent = v;
            else if (k === 'class') e.className = v;
            else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
            else e.setAttribute(k, v === true ? '' : v);
        }
        for (let i = 2; i < arguments.length; i++) {
            const c = arguments[i];
            if (c === null || c === undefined || c === false) continue;
            e.append(c instanceof Node ? c : String(c));
        }
        return e;
    }

    function svg(tag, attrs) {
        const e = document.createElementNS(SVGNS, tag);
        for (const k in attrs || {}) {
            if (k === 'text') e.textContent = attrs[k];
            else e.setAttribute(k, attrs[k]);
        }
        return e;
    }

    function fmtGap(v) {
        return typeof v === 'number' && isFinite(v) ? v.toExponential(2) : '–';
    }

    function fmtCount(v) {
        if (typeof v !== 'number' || !isFinite(v)) return '–';
        const units = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
        for (const [u, s] of units)
            if (Math.abs(v) >= u) return (v / u).toFixed(2) + ' ' + s;
        return String(Math.round(v * 100) / 100);
    }

    function fmtTime(ms) {
        if (!ms) return '–';
        const d = new Date(ms);
        return d.toLocaleString();
    }

    function fmtValue(v) {
        if (v === null || v === undefined) return '–';
        if (typeof v === 'number')
            return Number.isInteger(v) ? String(v) :
                (Math.abs(v) >= 1e4 || Math.abs(v) < 1e-3) && v !== 0 ? v.toExponential(4) :
                String(Math.round(v * 1e6) / 1e6);
        if (typeof v === 'object') return JSON.stringify(v);
        return String(v);
    }

    function compressorText(spec) {
        const c = spec && spec.compressor;
        if (!c || typeof c !== 'object') return '';
        let s = c.type || '';
        for (const k of Object.keys(c))
            if (k !== 'type' && c[k] !== null && c[k] !== 0) s += ' ' + k + '=' + c[k];
        return s;
    }

    /* ---- the token and the API ---- */

    function token() {
        return sessionStorage.getItem(TOKEN_KEY) || '';
    }

    function authHeaders(extra) {
        const h = Object.assign({}, extra || {});
        const t = token();
        if (t) h.Authorization = 'Bearer ' + t;
        return h;
    }

    function notice(text, isError) {
        const n = document.getElementById('notice');
        n.textContent = text || '';
        n.hidden = !text;
        n.className = isError ? 'error' : '';
    }

    function showTokenState() {
        const s = document.getElementById('token-state');
        s.textContent = token() ? 'token set for this tab' : 'no token';
        s.className = token() ? 'set' : '';
    }

    /* One request. Resolves to {status, ok, doc}; doc is parsed JSON for
       JSON and problem replies, a Blob when asked, else text. A 401 asks
       for the token. */
    async function api(method, path, body, opts) {
        const headers = authHeaders({Accept: (opts && opts.accept) || 'application/json'});
        if (body !== undefined) headers['Content-Type'] = 'application/json';
        let r;
        try {
            r = await fetch(path, {method: method, headers: headers, cache: 'no-store',
                                   body: body !== undefined ? JSON.stringify(body) : undefined,
                                   signal: opts && opts.signal});
        } catch (e) {
            if (e.name === 'AbortError') throw e;
            return {status: 0, ok: false, doc: {detail: 'the service cannot be reached (' +
                                                          e.message + ')'}};
        }
        const ct = r.headers.get('Content-Type') || '';
        let doc;
        if (ct.indexOf('json') >= 0) doc = await r.json().catch(() => null);
        else if (opts && opts.blob && r.ok) doc = await r.blob();
        else doc = await r.text();
        if (r.status === 401) {
            notice('The service needs a token: ' + ((doc && doc.detail) || 'unauthorized') +
                   ' Enter it at the top right.', true);
            document.getElementById('token-input').focus();
        }
        return {status: r.status, ok: r.ok, doc: doc, headers: r.headers};
    }

    function problemText(r) {
        const d = r.doc;
        if (d && typeof d === 'object' && d.detail) return d.detail;
        return 'HTTP ' + r.status;
    }

    /*
     * Server-Sent Events over fetch(): calls onEvent(event, data, id) per
     * event until the stream ends (resolves) or fails (rejects).
     */
    async function readEvents(path, onEvent, signal) {
        const r = await fetch(path, {headers: authHeaders({Accept: 'text/event-stream'}),
                                     cache: 'no-store', signal: signal});
        if (!r.ok) {
            const doc = await r.json().catch(() => null);
            const err = new Error((doc && doc.detail) || 'HTTP ' + r.status);
            err.status = r.status;
            throw err;
        }
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = '', ev = {event: 'message', data: [], id: null};
        for (;;) {
            const part = await reader.read();
            if (part.done) break;
            buf += dec.decode(part.value, {stream: true});
            let nl;
            while ((nl = buf.indexOf('\n')) >= 0) {
                let line = buf.slice(0, nl);
                buf = buf.slice(nl + 1);
                if (line.endsWith('\r')) line = line.slice(0, -1);
                if (line === '') {
                    if (ev.data.length) onEvent(ev.event, ev.data.join('\n'), ev.id);
                    ev = {event: 'message', data: [], id: null};
                    continue;
                }
                if (line[0] === ':') continue;
                const c = line.indexOf(':');
                const field = c < 0 ? line : line.slice(0, c);
                let value = c < 0 ? '' : line.slice(c + 1);
                if (value[0] === ' ') value = value.slice(1);
                if (field === 'event') ev.event = value;
                else if (field === 'data') ev.data.push(value);
                else if (field === 'id') ev.id = value;
            }
        }
    }

    /* ---- the chart (SVG drawn here from the rows) ---- */

    function niceStep(raw) {
        const mag = Math.pow(10, Math.floor(Math.log10(raw)));
        const n = raw / mag;
        return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
    }

    /* As service/plot.c labels them: fixed point, then k, M, G, T, then
       exponents. mag is the largest |value| on the axis. */
    function tickLabel(v, step, mag) {
        const decimals = s => Math.max(0, -Math.floor(Math.log10(s) + 1e-9));
        if (v === 0) return '0';
        if (mag < 1e4 && step >= 1e-4) return v.toFixed(decimals(step));
        if (mag >= 1e4 && mag < 1e15 && step >= 1) {
            const u = Math.min(4, Math.floor(Math.log10(mag) / 3 + 1e-9));
            const unit = Math.pow(1000, u);
            return (v / unit).toFixed(decimals(step / unit)) + 'kMGT'[u - 1];
        }
        return v.toExponential(Math.max(0, Math.floor(Math.log10(Math.abs(v))) -
                                            Math.floor(Math.log10(step) + 1e-9)))
            .replace(/\.?0+e/, 'e');
    }

    /*
     * Draws rows ({x, y}) into the <svg>: linear x with 1-2-5 ticks, log10
     * y with decade ticks; points with y <= 0 or not finite break the line.
     * More rows than the width has pixels are reduced to each pixel
     * column's lowest and highest point.
     */
    function drawChart(root, xs, ys, xlabel) {
        const W = 760, H = 360, L = 64, R = 16, T = 14, B = 44;
        const pw = W - L - R, ph = H - T - B;
        root.replaceChildren();
        root.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
        let xlo = Infinity, xhi = -Infinity, ylo = Infinity, yhi = -Infinity, n = 0;
        for (let i = 0; i < xs.length; i++) {
            const x = xs[i], y = ys[i];
            if (!isFinite(x) || !isFinite(y) || y <= 0) continue;
            const ly = Math.log10(y);
            xlo = Math.min(xlo, x); xhi = Math.max(xhi, x);
            ylo = Math.min(ylo, ly); yhi = Math.max(yhi, ly);
            n++;
        }
        root.append(svg('rect', {class: 'frame', x: L, y: T, width: pw, height: ph}));
        root.append(svg('text', {x: L + pw / 2, y: H - 8, 'text-anchor': 'middle',
                                 text: xlabel}));
        root.append(svg('text', {x: 0, y: 0, 'text-anchor': 'middle', text: 'relative gap',
                                 transform: 'translate(14 ' + (T + ph / 2) + ') rotate(-90)'}));
        root.setAttribute('data-points', '0');
        if (n === 0) {
            root.append(svg('text', {x: L + pw / 2, y: T + ph / 2, 'text-anchor': 'middle',
                                     class: 'nodata', text: 'no data yet'}));
            return 0;
        }
        if (xhi <= xlo) { xhi = xlo + 1; }
        const xstep = niceStep((xhi - xlo) / 6);
        xlo = Math.floor(xlo / xstep) * xstep;
        xhi = Math.ceil(xhi / xstep) * xstep;
        let a = Math.floor(ylo), b = Math.ceil(yhi);
        if (b <= a) b = a + 1;
        let ystep = 1;
        while ((b - a) / ystep > 8) ystep = ystep === 1 ? 2 : ystep === 2 ? 5 : ystep * 2;
        a = Math.floor(a / ystep) * ystep;
        b = Math.ceil(b / ystep) * ystep;
        const px = x => L + (x - xlo) / (xhi - xlo) * pw;
        const py = ly => T + ph - (ly - a) / (b - a) * ph;
        const grid = svg('g', {class: 'grid'});
        const labels = svg('g', {class: 'labels'});
        for (let t = xlo, i = 0; t <= xhi + xstep / 2 && i < 40; t += xstep, i++) {
            const x = px(t);
            grid.append(svg('line', {x1: x, y1: T, x2: x, y2: T + ph}));
            labels.append(svg('text', {x: x, y: T + ph + 16, 'text-anchor': 'middle',
                                       class: 'xtick',
                                       text: tickLabel(t, xstep, Math.max(Math.abs(xlo), Math.abs(xhi)))}));
        }
        for (let e = a; e <= b; e += ystep) {
            const y = py(e);
            grid.append(svg('line', {x1: L, y1: y, x2: L + pw, y2: y}));
            const t = svg('text', {x: L - 6, y: y + 4, 'text-anchor': 'end', class: 'ytick'});
            t.append('10');
            t.append(svg('tspan', {dy: -5, 'font-size': 9, text: String(e)}));
            labels.append(t);
        }
        root.append(grid, labels);
        root.querySelector('.frame').remove();
        root.append(svg('rect', {class: 'frame', x: L, y: T, width: pw, height: ph}));

        /* Per pixel column: the first, lowest and highest point, in order. */
        let d = '', drawn = 0, broken = true, col = -1, bucket = [];
        const flush = () => {
            if (!bucket.length) return;
            const lo = bucket.reduce((m, p) => p[1] < m[1] ? p : m);
            const hi = bucket.reduce((m, p) => p[1] > m[1] ? p : m);
            const keep = [bucket[0]];
            for (const p of [lo, hi, bucket[bucket.length - 1]])
                if (keep.indexOf(p) < 0) keep.push(p);
            keep.sort((p, q) => p[2] - q[2]);
            for (const p of keep) {
                d += (broken ? 'M' : 'L') + p[0].toFixed(1) + ' ' + p[1].toFixed(1) + ' ';
                broken = false;
                drawn++;
            }
            bucket = [];
        };
        let last = null;
        for (let i = 0; i < xs.length; i++) {
            const x = xs[i], y = ys[i];
            if (!isFinite(x) || !isFinite(y) || y <= 0) {
                flush();
                broken = true;
                continue;
            }
            const p = [px(x), py(Math.log10(y)), i];
            const c = Math.floor(p[0]);
            if (c !== col) { flush(); col = c; }
            bucket.push(p);
            last = p;
        }
        flush();
        root.append(svg('path', {class: 'curve', d: d.trim()}));
        if (last) root.append(svg('circle', {class: 'last', cx: last[0], cy: last[1], r: 3}));
        root.setAttribute('data-points', String(drawn));
        return drawn;
    }

    /* ---- pages ---- */

    let leaveHooks = [];
    function onLeave(f) { leaveHooks.push(f); }

    function stateBadge(state) {
        return el('span', {class: 'badge state-' + state, 'data-state': state, text: state});
    }

    function progressCell(job) {
        const spec = job.spec || {};
        const round = job.progress && job.progress.round;
        const max = spec.max_rounds || 0;
        let frac = max && typeof round === 'number' ? Math.min(1, round / max) : 0;
        if (job.state === 'succeeded') frac = 1;
        return el('td', {class: 'num'},
                  el('progress', {max: 1, value: frac.toFixed(3)}), ' ',
                  typeof round === 'number' ? String(round) : '–',
                  max ? el('span', {class: 'muted', text: ' / ' + max}) : null);
    }

    async function pageJobs(main) {
        const filter = el('select', {id: 'state-filter', 'aria-label': 'state'},
                          el('option', {value: '', text: 'all states'}),
                          ...['queued', 'running'].concat(FINAL).map(s => el('option', {value: s, text: s})));
        const xid = el('input', {id: 'experiment-id', placeholder: 'x_… experiment id',
                                 size: 22});
        const tbody = el('tbody');
        const status = el('span', {class: 'muted', id: 'jobs-status'});
        main.append(
            el('h1', {text: 'Jobs'}),
            el('div', {class: 'toolbar'}, filter, status, el('span', {class: 'grow'}),
               el('form', {onsubmit: e => {
                   e.preventDefault();
                   if (xid.value.trim()) location.hash = '#/experiments/' + xid.value.trim();
               }}, xid, ' ', el('button', {class: 'secondary', text: 'Open experiment'})),
               el('a', {href: '#/submit'}, el('button', {type: 'button', text: 'New job'}))),
            el('table', {id: 'jobs'},
               el('thead', {}, el('tr', {},
                  ...['Job', 'State', 'Algorithm', 'Compressor', 'Dataset', 'Workers']
                      .map(t => el('th', {text: t})),
                  el('th', {class: 'num', text: 'Progress (rounds)'}),
                  el('th', {class: 'num', text: 'Gap'}),
                  el('th', {text: 'Created'}))),
               tbody));
        async function refresh() {
            const q = filter.value ? '&state=' + encodeURIComponent(filter.value) : '';
            const r = await api('GET', '/v1/jobs?limit=100' + q);
            if (!r.ok) {
                status.textContent = problemText(r);
                return;
            }
            status.textContent = (r.doc.next_cursor ? 'the newest ' : '') + r.doc.jobs.length +
                ' job' + (r.doc.jobs.length === 1 ? '' : 's');
            tbody.replaceChildren(...r.doc.jobs.map(j => el('tr', {'data-job': j.id, 'data-state': j.state},
                el('td', {}, el('a', {href: '#/jobs/' + j.id, class: 'mono', text: j.id}),
                   j.name ? el('div', {class: 'muted', text: j.name}) : null),
                el('td', {}, stateBadge(j.state)),
                el('td', {text: j.algorithm}),
                el('td', {text: compressorText(j.spec) || j.compressor}),
                el('td', {text: j.dataset}),
                el('td', {class: 'num', text: j.workers}),
                progressCell(j),
                el('td', {class: 'num gap', text: fmtGap(j.progress && j.progress.rel_gap)}),
                el('td', {class: 'muted', text: fmtTime(j.created_at)}))));
            if (!r.doc.jobs.length)
                tbody.append(el('tr', {}, el('td', {colspan: 9, class: 'muted',
                    text: 'No jobs yet: submit one.'})));
        }
        filter.addEventListener('change', refresh);
        await refresh();
        const timer = setInterval(refresh, 2000);
        onLeave(() => clearInterval(timer));
    }

    function kvTable(obj, id) {
        const rows = [];
        const walk = (o, prefix) => {
            for (const k of Object.keys(o || {})) {
                const v = o[k];
                if (v && typeof v === 'object' && !Array.isArray(v)) walk(v, prefix + k + '.');
                else rows.push(el('tr', {}, el('td', {text: prefix + k}),
                                  el('td', {class: 'mono', text: fmtValue(v)})));
            }
        };
        walk(obj, '');
        if (!rows.length) rows.push(el('tr', {}, el('td', {colspan: 2, class: 'muted',
                                                          text: 'not yet: the job has not started'})));
        return el('table', {class: 'kv', id: id}, el('tbody', {}, ...rows));
    }

    async function pageJob(main, id) {
        const ctl = new AbortController();
        onLeave(() => ctl.abort());
        const r = await api('GET', '/v1/jobs/' + encodeURIComponent(id));
        if (!r.ok) {
            main.append(el('h1', {text: 'Job ' + id}), el('p', {class: 'problem', text: problemText(r)}));
            return;
        }
        let job = r.doc;
        const rows = {round: [], bits: [], seconds: [], gap: []};
        let lastRound = -1, xaxis = 'rounds', pending = false;

        const badge = el('span', {id: 'job-state'});
        const reason = el('p', {class: 'muted', id: 'job-reason'});
        const facts = el('div', {class: 'facts', id: 'job-facts'});
        const chart = svg('svg', {class: 'chart', id: 'chart', role: 'img',
                                  'aria-label': 'relative gap against ' + xaxis});
        const live = el('span', {class: 'muted', id: 'live'});
        const cancel = el('button', {class: 'danger', id: 'cancel', text: 'Cancel',
            onclick: async () => {
                cancel.disabled = true;
                const c = await api('POST', '/v1/jobs/' + id + '/cancel', {});
                if (!c.ok) notice(problemText(c), true);
            }});
        const xsel = el('select', {id: 'x-axis', 'aria-label': 'x axis',
                                   onchange: () => { xaxis = xsel.value; redraw(); }},
                        ...Object.keys(X_AXES).map(k => el('option', {value: k, text: 'against ' + k})));
        const csv = el('button', {class: 'secondary', text: 'Download CSV', onclick: async () => {
            const c = await api('GET', '/v1/jobs/' + id + '/metrics?limit=10000', undefined,
                                {accept: 'text/csv', blob: true});
            if (!c.ok) { notice(problemText(c), true); return; }
            const a = el('a', {href: URL.createObjectURL(c.doc), download: id + '.csv'});
            document.body.append(a);
            a.click();
            a.remove();
        }});
        const params = el('div');
        const problem = el('div');

        function showJob() {
            badge.replaceChildren(stateBadge(job.state));
            reason.textContent = job.reason || '';
            reason.hidden = !job.reason;
            cancel.hidden = FINAL.indexOf(job.state) >= 0;
            const p = job.progress || {};
            const fact = (k, v) => el('div', {}, el('span', {text: k}), v);
            facts.replaceChildren(
                fact('dataset', job.dataset), fact('algorithm', job.algorithm),
                fact('compressor', compressorText(job.spec) || job.compressor),
                fact('workers', String(job.workers)), fact('backend', job.backend),
                fact('round', el('b', {id: 'fact-round', text: p.round === null ? '–' : String(p.round)})),
                fact('relative gap', el('b', {id: 'fact-gap', text: fmtGap(p.rel_gap)})),
                fact('bits up per worker', fmtCount(p.bits_up)),
                fact('created', fmtTime(job.created_at)),
                fact('finished', fmtTime(job.finished_at)));
            params.replaceChildren(kvTable(job.params, 'params'));
            problem.replaceChildren(kvTable(job.problem, 'problem'));
        }

        function redraw() {
            pending = false;
            const xs = xaxis === 'rounds' ? rows.round : xaxis === 'bits' ? rows.bits : rows.seconds;
            drawChart(chart, xs, rows.gap, X_AXES[xaxis]);
        }

        function addRow(m) {
            if (typeof m.round !== 'number' || m.round <= lastRound) return;
            rows.round.push(m.round);
            rows.bits.push(m.bits_up === null ? NaN : m.bits_up);
            rows.seconds.push(m.seconds === null ? NaN : m.seconds);
            rows.gap.push(m.rel_gap === null ? NaN : m.rel_gap);
            lastRound = m.round;
            const fr = document.getElementById('fact-round');
            const fg = document.getElementById('fact-gap');
            if (fr) fr.textContent = String(m.round);
            if (fg) fg.textContent = fmtGap(m.rel_gap);
            if (!pending) {
                pending = true;
                requestAnimationFrame(redraw);
            }
        }

        main.append(
            el('h1', {}, 'Job ', el('span', {class: 'mono', text: job.id}), ' ', badge), reason,
            job.name ? el('p', {class: 'muted', text: job.name}) : null,
            el('div', {class: 'card'}, facts),
            el('div', {class: 'card'},
               el('div', {class: 'toolbar'}, el('b', {text: 'Relative gap (P − P*) / (P0 − P*)'}),
                  xsel, live, el('span', {class: 'grow'}), csv, cancel),
               el('div', {class: 'chart-wrap'}, chart)),
            el('div', {class: 'grid2'},
               el('div', {}, el('h2', {text: 'Resolved parameters'}), params),
               el('div', {}, el('h2', {text: 'Problem'}), problem)),
            el('h2', {text: 'Spec'}), el('pre', {class: 'mono', id: 'spec',
                                                 text: JSON.stringify(job.spec, null, 2)}));
        showJob();
        redraw();

        /* History first (downsampled to what the chart can show), then
           the live rows after it. */
        for (let page = 0, after = -1; page < 50; page++) {
            const h = await api('GET', '/v1/jobs/' + id + '/metrics?limit=2000&max_points=2000&after=' +
                                after, undefined, {signal: ctl.signal});
            if (!h.ok) break;
            h.doc.rows.forEach(addRow);
            if (!h.doc.more || h.doc.next_after <= after) break;
            after = h.doc.next_after;
        }

        async function refreshJob() {
            const j = await api('GET', '/v1/jobs/' + id, undefined, {signal: ctl.signal});
            if (j.ok) { job = j.doc; showJob(); }
        }
        let failures = 0;
        while (!ctl.signal.aborted && FINAL.indexOf(job.state) < 0) {
            live.textContent = '● live';
            try {
                await readEvents('/v1/jobs/' + id + '/events?after=' + lastRound, (event, data) => {
                    const m = JSON.parse(data);
                    if (event === 'metric') addRow(m);
                    else if (event === 'state') {
                        job.state = m.state;
                        job.reason = m.reason;
                        showJob();
                    }
                }, ctl.signal);
                failures = 0;
            } catch (e) {
                if (ctl.signal.aborted) return;
                if (e.status === 401 || e.status === 404) { live.textContent = e.message; return; }
                failures++;
                live.textContent = 'reconnecting (' + e.message + ')';
                await new Promise(ok => setTimeout(ok, Math.min(5000, 500 * failures)));
            }
            await refreshJob();
        }
        live.textContent = '';
        if (!ctl.signal.aborted) {
            await refreshJob();
            redraw();
        }
    }

    async function pageExperiment(main, id) {
        const ctl = new AbortController();
        onLeave(() => ctl.abort());
        let xaxis = 'rounds', url = null, timer = null;
        const img = el('img', {class: 'plot', id: 'experiment-plot', alt: 'convergence plot'});
        const tbody = el('tbody');
        const title = el('h1', {}, 'Experiment ', el('span', {class: 'mono', text: id}));
        const status = el('span', {class: 'muted'});
        const xsel = el('select', {'aria-label': 'x axis', onchange: () => { xaxis = xsel.value; plot(); }},
                        ...Object.keys(X_AXES).map(k => el('option', {value: k, text: 'against ' + k})));
        main.append(title,
            el('div', {class: 'card'}, el('div', {class: 'toolbar'}, el('b', {text: 'Compared'}), xsel, status),
               img),
            el('table', {id: 'comparison'},
               el('thead', {}, el('tr', {}, ...['Job', 'Variant', 'State', 'Reached target']
                   .map(t => el('th', {text: t})),
                   ...['Rounds to target', 'Bits up to target', 'Seconds', 'Rounds', 'Final gap']
                   .map(t => el('th', {class: 'num', text: t})))),
               tbody));
        async function plot() {
            const r = await api('GET', '/v1/experiments/' + encodeURIComponent(id) + '/plot.svg?x=' + xaxis,
                                undefined, {accept: 'image/svg+xml', blob: true, signal: ctl.signal});
            if (!r.ok) { status.textContent = problemText(r); return; }
            if (url) URL.revokeObjectURL(url);
            url = URL.createObjectURL(r.doc);
            img.src = url;
        }
        async function refresh() {
            const r = await api('GET', '/v1/experiments/' + encodeURIComponent(id), undefined,
                                {signal: ctl.signal});
            if (!r.ok) { status.textContent = problemText(r); return false; }
            const x = r.doc;
            title.replaceChildren('Experiment ', el('span', {class: 'mono', text: x.id}),
                                  x.name ? ' — ' + x.name : '');
            tbody.replaceChildren(...x.comparison.map(c => el('tr', {'data-job': c.job},
                el('td', {}, el('a', {href: '#/jobs/' + c.job, class: 'mono', text: c.job})),
                el('td', {text: c.algorithm + ', ' + compressorText({compressor: c.compressor_spec})}),
                el('td', {}, stateBadge(c.state)),
                el('td', {text: c.reached ? 'yes' : 'no'}),
                el('td', {class: 'num', text: fmtValue(c.rounds_to_target)}),
                el('td', {class: 'num', text: fmtCount(c.bits_up_to_target)}),
                el('td', {class: 'num', text: fmtValue(c.seconds_to_target)}),
                el('td', {class: 'num', text: fmtValue(c.rounds)}),
                el('td', {class: 'num', text: fmtGap(c.final_rel_gap)}))));
            await plot();
            return x.comparison.some(c => FINAL.indexOf(c.state) < 0);
        }
        const running = await refresh();
        if (running) {
            timer = setInterval(async () => { if (!(await refresh())) clearInterval(timer); }, 3000);
            onLeave(() => clearInterval(timer));
        }
        onLeave(() => { if (url) URL.revokeObjectURL(url); });
    }

    /* Marks the form's inputs named by the problem's fields and lists every
       message as the API worded it. */
    function showFieldErrors(form, list, doc) {
        const box = form.querySelector('.form-errors');
        form.querySelectorAll('label.invalid').forEach(l => l.classList.remove('invalid'));
        form.querySelectorAll('.field-error').forEach(s => { s.textContent = ''; });
        box.replaceChildren();
        let errors = [];
        if (doc && Array.isArray(doc.errors)) errors = doc.errors;
        else if (doc && doc.field) errors = [{field: doc.field, detail: doc.detail}];
        if (!errors.length) errors = [{field: '', detail: (doc && doc.detail) || String(doc)}];
        for (const e of errors) {
            const text = e.field && e.detail && e.detail.indexOf(e.field + ':') !== 0 ?
                e.field + ': ' + e.detail : e.detail;
            box.append(el('li', {'data-field': e.field || '', text: text}));
            const base = (e.field || '').split('.')[0];
            const slot = form.querySelector('[data-field="' + CSS.escape(e.field || '') + '"]') ||
                         form.querySelector('[data-field="' + CSS.escape(base) + '"]');
            if (slot) {
                slot.closest('label').classList.add('invalid');
                slot.textContent = e.detail;
            }
        }
        if (list) list.scrollIntoView({block: 'nearest'});
    }

    async function pageSubmit(main) {
        const field = (label, input, key, wide) =>
            el('label', {class: wide ? 'wide' : ''}, label, input,
               el('small', {class: 'field-error', 'data-field': key}));
        const dataset = el('input', {name: 'dataset', list: 'datasets', value: 'mushrooms', required: true});
        const datalist = el('datalist', {id: 'datasets'});
        const algorithm = el('select', {name: 'algorithm'},
                             ...ALGORITHMS.map(a => el('option', {value: a, text: a})));
        const compressor = el('select', {name: 'compressor'},
                              ...COMPRESSORS.map(c => el('option', {value: c, text: c})));
        const k = el('input', {name: 'k', value: '5', inputmode: 'numeric'});
        const workers = el('input', {name: 'workers', value: '10', inputmode: 'numeric'});
        const lambda = el('input', {name: 'lambda2_rel', placeholder: 'default', inputmode: 'decimal'});
        const rounds = el('input', {name: 'max_rounds', value: '1000', inputmode: 'numeric'});
        const target = el('input', {name: 'target', placeholder: 'default', inputmode: 'decimal'});
        const name = el('input', {name: 'name', placeholder: 'optional'});
        const extra = el('textarea', {name: 'extra', placeholder: '{"batch": 1, "seed": 7}'});
        const errors = el('ul', {class: 'form-errors', id: 'job-errors'});
        const submit = el('button', {type: 'submit', id: 'submit-job', text: 'Submit job'});
        const form = el('form', {class: 'submit card', id: 'job-form', novalidate: true},
            field('Dataset', dataset, 'dataset'), datalist,
            field('Algorithm', algorithm, 'algorithm'),
            field('Compressor', compressor, 'compressor'),
            field('k (topk, randk)', k, 'compressor.k'),
            field('Workers', workers, 'workers'),
            field('lambda2_rel', lambda, 'lambda2_rel'),
            field('Max rounds', rounds, 'max_rounds'),
            field('Target relative gap', target, 'target'),
            field('Name', name, 'name'),
            field('More spec keys (JSON object)', extra, 'extra', true),
            errors,
            el('div', {class: 'actions'}, submit));
        /* What the user typed goes to the API as typed: numbers as
           numbers, anything else as a string the API will name. */
        const num = s => (s.trim() !== '' && isFinite(Number(s)) ? Number(s) : s.trim());
        form.addEventListener('submit', async e => {
            e.preventDefault();
            const spec = {dataset: dataset.value.trim(), algorithm: algorithm.value,
                          compressor: {type: compressor.value}};
            if (k.value.trim() !== '' && compressor.value !== 'none' && compressor.value !== 'dither')
                spec.compressor.k = num(k.value);
            for (const [input, key] of [[workers, 'workers'], [lambda, 'lambda2_rel'],
                                        [rounds, 'max_rounds'], [target, 'target']])
                if (input.value.trim() !== '') spec[key] = num(input.value);
            if (name.value.trim()) spec.name = name.value.trim();
            if (extra.value.trim()) {
                let more;
                try {
                    more = JSON.parse(extra.value);
                } catch (err) {
                    showFieldErrors(form, errors, {field: 'extra', detail: 'not JSON: ' + err.message});
                    return;
                }
                if (!more || typeof more !== 'object' || Array.isArray(more)) {
                    showFieldErrors(form, errors, {field: 'extra', detail: 'must be a JSON object'});
                    return;
                }
                Object.assign(spec, more);
            }
            submit.disabled = true;
            const r = await api('POST', '/v1/jobs', spec);
            submit.disabled = false;
            if (r.status === 201 || r.status === 200) {
                location.hash = '#/jobs/' + r.doc.id;
                return;
            }
            showFieldErrors(form, errors, r.doc && typeof r.doc === 'object' ? r.doc :
                            {detail: problemText(r)});
        });

        const xbody = el('textarea', {id: 'experiment-spec', rows: 12});
        xbody.value = JSON.stringify({
            name: 'eclk vs ec-gd', base: {dataset: 'mushrooms', workers: 10, lambda2_rel: 1e-3,
                                          max_rounds: 2000, target: 1e-6,
                                          compressor: {type: 'topk', k: 5}},
            variants: [{algorithm: 'eclk'}, {algorithm: 'ec-gd'}, {algorithm: 'ef21'}]}, null, 2);
        const xerrors = el('ul', {class: 'form-errors', id: 'experiment-errors'});
        const xform = el('form', {class: 'submit card', id: 'experiment-form', novalidate: true},
            el('label', {class: 'wide'}, 'Experiment: a base spec and its variants (JSON)', xbody,
               el('small', {class: 'field-error', 'data-field': 'experiment'})),
            xerrors,
            el('div', {class: 'actions'}, el('button', {type: 'submit', text: 'Submit experiment'})));
        xform.addEventListener('submit', async e => {
            e.preventDefault();
            let doc;
            try {
                doc = JSON.parse(xbody.value);
            } catch (err) {
                showFieldErrors(xform, xerrors, {field: 'experiment', detail: 'not JSON: ' + err.message});
                return;
            }
            const r = await api('POST', '/v1/experiments', doc);
            if (r.status === 201) {
                location.hash = '#/experiments/' + r.doc.id;
                return;
            }
            showFieldErrors(xform, xerrors, r.doc && typeof r.doc === 'object' ? r.doc :
                            {detail: problemText(r)});
        });

        main.append(el('h1', {text: 'Submit a job'}), form,
                    el('h2', {text: 'Or an experiment'}), xform);
        const d = await api('GET', '/v1/datasets');
        if (d.ok && d.doc && Array.isArray(d.doc.datasets))
            datalist.replaceChildren(...d.doc.datasets.map(s => el('option', {value: s.name})));
    }

    /* ---- routing ---- */

    async function route() {
        const hooks = leaveHooks;
        leaveHooks = [];
        hooks.forEach(f => f());
        notice('');
        const main = document.getElementById('main');
        main.replaceChildren();
        const h = location.hash.replace(/^#/, '') || '/';
        let m;
        try {
            if ((m = h.match(/^\/jobs\/([A-Za-z0-9_.-]+)$/))) await pageJob(main, m[1]);
            else if ((m = h.match(/^\/experiments\/([A-Za-z0-9_.-]+)$/))) await pageExperiment(main, m[1]);
            else if (h === '/submit') await pageSubmit(main);
            else await pageJobs(main);
        } catch (e) {
            if (e.name !== 'AbortError') notice('The page failed: ' + e.message, true);
        }
    }

    document.addEventListener('DOMContentLoaded', () => {
        const form = document.getElementById('token-form');
        const input = document.getElementById('token-input');
        form.addEventListener('submit', e => {
            e.preventDefault();
            if (input.value.trim()) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
            input.value = '';
            showTokenState();
            route();
        });
        document.getElementById('token-clear').addEventListener('click', () => {
            sessionStorage.removeItem(TOKEN_KEY);
            showTokenState();
            route();
        });
        window.addEventListener('hashchange', route);
        showTokenState();
        route();
    });
})();
