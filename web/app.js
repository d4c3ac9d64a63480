/*
 * ecopt dashboard: plain JavaScript, no build step, no dependency.
 * Pages (hash routes): #/ jobs (filters, sorting, paging, a selection to
 * compare), #/jobs/ID a job with its live chart, #/experiments the list,
 * #/experiments/ID an experiment compared, #/compare?jobs=ID,... any jobs
 * compared, #/datasets the data directory, #/submit the forms.
 * Every request carries the token from sessionStorage as a bearer header;
 * the live chart reads the event stream with fetch() so the token never
 * goes into a URL. Text from the API is only ever set as textContent.
 */
'use strict';

(function () {
    const TOKEN_KEY = 'ecopt.token';
    const FINAL = ['succeeded', 'failed', 'cancelled', 'interrupted'];
    /* The metric columns, as the rows and the CSV name them. */
    const COLUMNS = {
        round: 'communication rounds', rel_gap: 'relative gap (P − P*) / (P0 − P*)',
        gap: 'gap P − P*', P: 'objective P', grad_norm: 'gradient norm',
        bits_up: 'bits sent up per worker', bits_down: 'bits received per worker',
        paper_bits: 'bits up per worker (the paper\'s count)', wire_up: 'wire bytes up per worker',
        wire_down: 'wire bytes down per worker', seconds: 'seconds',
    };
    const Y_COLUMNS = ['rel_gap', 'gap', 'P', 'grad_norm', 'bits_up', 'bits_down', 'paper_bits',
                       'wire_up', 'wire_down', 'seconds'];
    /* The x axes, named as the plot routes' ?x= names them. */
    const X_AXES = {rounds: {col: 'round', name: 'rounds'}, bits: {col: 'bits_up', name: 'bits up'},
                    seconds: {col: 'seconds', name: 'seconds'}};
    /* Curve colours; app.css has the same as .swatch.c0 to .c9. */
    const PALETTE = ['#1f6feb', '#d9480f', '#2b8a3e', '#ae3ec9', '#e8590c', '#0c8599', '#c2255c',
                     '#5c940d', '#6741d9', '#868e96'];
    /* Dash patterns: the runs of one variant share its colour and differ
       in dash, as in the service's plots. */
    const DASHES = ['', '7 3', '2 2', '9 3 2 3', '4 4', '12 4', '1 3 1 6', '6 2 2 2'];
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

    /* Sets keys of the hash's query (an empty value removes the key)
       without a new history entry or a hashchange. */
    function setQuery(params) {
        const h = location.hash.replace(/^#/, '') || '/';
        const i = h.indexOf('?');
        const path = i < 0 ? h : h.slice(0, i);
        const q = new URLSearchParams(i < 0 ? '' : h.slice(i + 1));
        for (const k in params) {
            if (params[k]) q.set(k, params[k]);
            else q.delete(k);
        }
        const s = q.toString().replace(/%2C/g, ',');
        history.replaceState(null, '', '#' + path + (s ? '?' + s : ''));
    }

    function compressorText(spec, key) {
        const c = spec && spec[key || 'compressor'];
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

    /* The API's lists of names (GET /v1/vocabulary: algorithms,
       compressors with their traits, stop reasons, ...), read once it
       answers: every menu is built from them, none from a copy here. */
    let vocabulary = null;
    async function loadVocabulary() {
        if (!vocabulary) {
            const r = await api('GET', '/v1/vocabulary');
            if (r.ok && r.doc && typeof r.doc === 'object') vocabulary = r.doc;
        }
        return vocabulary || {algorithms: [], compressors: [], losses: [], backends: [],
                              stop_reasons: [], states: []};
    }
    const namesOf = list => (list || []).map(x => x.name);

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
        if (Math.abs(v) < step * 1e-9) return '0';
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

    /* Linear ticks over [lo, hi]: the range widened to whole steps. */
    function linearTicks(lo, hi, count) {
        if (hi <= lo) { const pad = Math.abs(lo) > 0 ? Math.abs(lo) * 0.1 : 1; lo -= pad; hi += pad; }
        const step = niceStep((hi - lo) / count);
        lo = Math.floor(lo / step + 1e-9) * step;
        hi = Math.ceil(hi / step - 1e-9) * step;
        return {lo: lo, hi: hi, step: step};
    }

    function rowValue(row, col) {
        const v = row[col];
        return typeof v === 'number' && isFinite(v) ? v : NaN;
    }

    /*
     * Draws series ([{label, color, rows}]) into the <svg>: opt.x and opt.y
     * name the metric columns, opt.log the y scale (log10 with decade ticks,
     * or linear with 1-2-5 ticks); x is linear. Points that are not finite
     * (or not positive on a log scale) break the line. More rows than the
     * width has pixels are reduced to each pixel column's first, lowest,
     * highest and last point. The drawing uses presentation attributes only,
     * so the <svg> saved as a file looks the same. Hovering shows each
     * curve's row nearest the pointer.
     */
    function drawChart(root, series, opt) {
        const W = 760, H = 380, L = 70, R = 16, T = 14, B = 44;
        const pw = W - L - R, ph = H - T - B;
        const ylog = !!opt.log;
        root.replaceChildren();
        root.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
        root.setAttribute('font-family', 'system-ui, sans-serif');
        root.setAttribute('font-size', '11');
        root.setAttribute('data-x', opt.x);
        root.setAttribute('data-y', opt.y);
        root.setAttribute('data-scale', ylog ? 'log' : 'linear');
        root.setAttribute('data-series', String(series.length));
        root.append(svg('rect', {x: 0, y: 0, width: W, height: H, fill: '#fff'}));
        const ok = (x, y) => isFinite(x) && isFinite(y) && (!ylog || y > 0);
        let xlo = Infinity, xhi = -Infinity, ylo = Infinity, yhi = -Infinity, n = 0;
        for (const s of series)
            for (const row of s.rows) {
                const x = rowValue(row, opt.x), y = rowValue(row, opt.y);
                if (!ok(x, y)) continue;
                const v = ylog ? Math.log10(y) : y;
                xlo = Math.min(xlo, x); xhi = Math.max(xhi, x);
                ylo = Math.min(ylo, v); yhi = Math.max(yhi, v);
                n++;
            }
        const frame = () => svg('rect', {class: 'frame', x: L, y: T, width: pw, height: ph,
                                         fill: 'none', stroke: '#475467'});
        root.append(svg('text', {x: L + pw / 2, y: H - 8, 'text-anchor': 'middle', fill: '#344054',
                                 class: 'xlabel', text: COLUMNS[opt.x] || opt.x}));
        root.append(svg('text', {x: 0, y: 0, 'text-anchor': 'middle', fill: '#344054', class: 'ylabel',
                                 text: (COLUMNS[opt.y] || opt.y) + (ylog ? ' (log)' : ''),
                                 transform: 'translate(14 ' + (T + ph / 2) + ') rotate(-90)'}));
        root.setAttribute('data-points', '0');
        root._hover = null;
        if (n === 0) {
            root.append(frame());
            root.append(svg('text', {x: L + pw / 2, y: T + ph / 2, 'text-anchor': 'middle',
                                     fill: '#98a2b3', class: 'nodata',
                                     text: ylog && series.some(s => s.rows.length) ?
                                         'no positive values to draw on a log scale' : 'no data yet'}));
            return 0;
        }
        /* The target in range: a curve is read against it. */
        if (typeof opt.target === 'number' && opt.target > 0 && opt.y === 'rel_gap') {
            const v = ylog ? Math.log10(opt.target) : opt.target;
            ylo = Math.min(ylo, v);
            yhi = Math.max(yhi, v);
        }
        const xt = linearTicks(xlo, xhi, 6);
        let yt;
        if (ylog) {
            let a = Math.floor(ylo), b = Math.ceil(yhi);
            if (b <= a) b = a + 1;
            let step = 1;
            while ((b - a) / step > 8) step = step === 1 ? 2 : step === 2 ? 5 : step * 2;
            yt = {lo: Math.floor(a / step) * step, hi: Math.ceil(b / step) * step, step: step};
        } else {
            yt = linearTicks(ylo, yhi, 6);
        }
        const px = x => L + (x - xt.lo) / (xt.hi - xt.lo) * pw;
        const py = v => T + ph - (v - yt.lo) / (yt.hi - yt.lo) * ph;
        const grid = svg('g', {class: 'grid', stroke: '#eceff3'});
        const labels = svg('g', {class: 'labels', fill: '#344054'});
        const xmag = Math.max(Math.abs(xt.lo), Math.abs(xt.hi));
        for (let i = 0, t = xt.lo; t <= xt.hi + xt.step / 2 && i < 40; i++, t = xt.lo + i * xt.step) {
            const x = px(t);
            grid.append(svg('line', {x1: x, y1: T, x2: x, y2: T + ph}));
            labels.append(svg('text', {x: x, y: T + ph + 16, 'text-anchor': 'middle', class: 'xtick',
                                       text: tickLabel(t, xt.step, xmag)}));
        }
        const ymag = Math.max(Math.abs(yt.lo), Math.abs(yt.hi));
        for (let i = 0, e = yt.lo; e <= yt.hi + yt.step / 2 && i < 40; i++, e = yt.lo + i * yt.step) {
            const y = py(e);
            grid.append(svg('line', {x1: L, y1: y, x2: L + pw, y2: y}));
            const t = svg('text', {x: L - 6, y: y + 4, 'text-anchor': 'end', class: 'ytick'});
            if (ylog) {
                t.append('10');
                t.append(svg('tspan', {dy: -5, 'font-size': 9, text: String(e)}));
            } else {
                t.textContent = tickLabel(e, yt.step, ymag);
            }
            labels.append(t);
        }
        root.append(grid, labels, frame());
        /* The target, a dashed line across, when the y column is the gap
           it is a target of and the line falls inside the plot. */
        if (typeof opt.target === 'number' && opt.target > 0 && opt.y === 'rel_gap') {
            const v = ylog ? Math.log10(opt.target) : opt.target;
            if (v >= yt.lo && v <= yt.hi) {
                const y = py(v);
                root.append(svg('line', {class: 'target', x1: L, y1: y, x2: L + pw, y2: y,
                                         stroke: '#c62828', 'stroke-width': 1, 'stroke-dasharray': '5 4'}),
                            svg('text', {class: 'target-label', x: L + 6, y: y - 4, fill: '#c62828',
                                         text: 'target ' + opt.target.toExponential(0)}));
                root.setAttribute('data-target', String(opt.target));
            }
        }

        let drawn = 0;
        const hover = [];
        series.forEach((s, si) => {
            /* Per pixel column: the first, lowest, highest and last point, in order. */
            let d = '', broken = true, col = -1, bucket = [], last = null;
            const pts = [];
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
            s.rows.forEach((row, i) => {
                const x = rowValue(row, opt.x), y = rowValue(row, opt.y);
                if (!ok(x, y)) {
                    flush();
                    broken = true;
                    return;
                }
                const p = [px(x), py(ylog ? Math.log10(y) : y), i];
                const c = Math.floor(p[0]);
                if (c !== col) { flush(); col = c; }
                bucket.push(p);
                pts.push([p[0], p[1], row]);
                last = p;
            });
            flush();
            /* The spread of a group of seeds: a light area from its least
               to its greatest value at each evaluation point. */
            if (s.band && s.band.length > 1) {
                const up = [], down = [];
                for (const b of s.band) {
                    if (!ok(b.x, b.lo) || !ok(b.x, b.hi)) continue;
                    up.push(px(b.x).toFixed(1) + ' ' + py(ylog ? Math.log10(b.hi) : b.hi).toFixed(1));
                    down.push(px(b.x).toFixed(1) + ' ' + py(ylog ? Math.log10(b.lo) : b.lo).toFixed(1));
                }
                if (up.length > 1)
                    root.append(svg('path', {class: 'band', 'data-series': String(si), fill: s.color,
                                             'fill-opacity': 0.18, stroke: 'none',
                                             d: 'M' + up.join(' L') + ' L' + down.reverse().join(' L') + ' Z'}));
            }
            const path = svg('path', {class: 'curve', 'data-series': String(si), d: d.trim() || 'M0 0',
                                      fill: 'none', stroke: s.color, 'stroke-width': 1.8,
                                      'stroke-linejoin': 'round'});
            if (s.dash) path.setAttribute('stroke-dasharray', s.dash);
            if (s.group !== undefined) path.setAttribute('data-group', String(s.group));
            root.append(path);
            if (last) root.append(svg('circle', {class: 'last', cx: last[0], cy: last[1], r: 3,
                                                 fill: s.color}));
            hover.push({label: s.label, color: s.color, pts: pts});
        });
        if (series.length > 1) {
            const legend = svg('g', {class: 'legend'});
            series.slice(0, 16).forEach((s, i) => {
                const y = T + 14 + i * 15;
                const line = svg('line', {x1: L + pw - 210, y1: y - 4, x2: L + pw - 186, y2: y - 4,
                                          stroke: s.color, 'stroke-width': 2.5});
                if (s.dash) line.setAttribute('stroke-dasharray', s.dash);
                legend.append(line);
                legend.append(svg('text', {x: L + pw - 181, y: y, fill: '#344054', class: 'legend-name',
                                           text: s.label.length > 32 ? s.label.slice(0, 31) + '…' : s.label}));
            });
            const box = svg('rect', {x: L + pw - 216, y: T + 4, width: 210,
                                     height: Math.min(16, series.length) * 15 + 4,
                                     fill: '#fff', 'fill-opacity': 0.85, stroke: '#d9dde5'});
            legend.prepend(box);
            root.append(legend);
        }
        root.setAttribute('data-points', String(drawn));
        root._hover = {series: hover, x: opt.x, y: opt.y, L: L, R: L + pw, T: T, B: T + ph};
        if (!root._hoverBound) {
            root._hoverBound = true;
            root.addEventListener('mousemove', e => showHover(root, e));
            root.addEventListener('mouseleave', () => {
                const g = root.querySelector('g.hover');
                if (g) g.remove();
            });
        }
        return drawn;
    }

    /* The row of each curve whose x is nearest the pointer's (x only grows
       along a curve: rounds, bits and seconds are cumulative). */
    function nearest(pts, x) {
        let lo = 0, hi = pts.length - 1;
        if (hi < 0) return null;
        while (lo < hi) {
            const mid = (lo + hi) >> 1;
            if (pts[mid][0] < x) lo = mid + 1; else hi = mid;
        }
        if (lo > 0 && Math.abs(pts[lo - 1][0] - x) <= Math.abs(pts[lo][0] - x)) lo--;
        return pts[lo];
    }

    function showHover(root, e) {
        const h = root._hover;
        const old = root.querySelector('g.hover');
        if (old) old.remove();
        if (!h) return;
        const m = root.getScreenCTM();
        if (!m) return;
        const p = new DOMPoint(e.clientX, e.clientY).matrixTransform(m.inverse());
        if (p.x < h.L || p.x > h.R || p.y < h.T || p.y > h.B) return;
        const hits = h.series.map(s => ({s: s, p: nearest(s.pts, p.x)})).filter(q => q.p);
        if (!hits.length) return;
        const g = svg('g', {class: 'hover', 'pointer-events': 'none'});
        const first = hits[0].p;
        g.setAttribute('data-round', String(first[2].round));
        g.setAttribute('data-value', String(first[2][h.y]));
        g.append(svg('line', {x1: first[0], y1: h.T, x2: first[0], y2: h.B, stroke: '#98a2b3',
                              'stroke-dasharray': '3 3'}));
        const lines = [];
        const xname = h.x === 'round' ? 'round' : (COLUMNS[h.x] || h.x);
        lines.push({text: xname + ' ' + fmtValue(first[2][h.x]) +
                    (h.x === 'round' ? '' : ' (round ' + first[2].round + ')'), color: null});
        for (const q of hits.slice(0, 12)) {
            g.append(svg('circle', {cx: q.p[0], cy: q.p[1], r: 3.5, fill: '#fff', stroke: q.s.color,
                                    'stroke-width': 2}));
            const who = hits.length > 1 ? q.s.label + ': ' : '';
            lines.push({text: who + (COLUMNS[h.y] ? h.y : h.y) + ' = ' + fmtValue(q.p[2][h.y]) +
                        (hits.length > 1 && h.x !== 'round' ? ' (round ' + q.p[2].round + ')' : ''),
                        color: q.s.color});
        }
        const box = svg('rect', {fill: '#fff', 'fill-opacity': 0.95, stroke: '#98a2b3', rx: 3});
        const text = svg('g', {class: 'hover-text'});
        lines.forEach((l, i) => {
            const t = svg('text', {x: 0, y: 14 + i * 14, fill: l.color || '#1d2330', text: l.text});
            text.append(t);
        });
        g.append(box, text);
        root.append(g);
        const bb = text.getBBox();
        const w = bb.width + 12, hgt = lines.length * 14 + 8;
        let bx = first[0] + 10, by = h.T + 6;
        if (bx + w > h.R) bx = first[0] - 10 - w;
        if (bx < h.L) bx = h.L + 2;
        box.setAttribute('x', bx);
        box.setAttribute('y', by);
        box.setAttribute('width', w);
        box.setAttribute('height', hgt);
        text.setAttribute('transform', 'translate(' + (bx + 6) + ' ' + by + ')');
    }

    /* The chart's controls: x (rounds, bits, seconds), y (a metric column),
       the y scale; onchange gets {x, y, log}. */
    function chartControls(choice, onchange) {
        const xsel = el('select', {id: 'x-axis', 'aria-label': 'x axis'},
                        ...Object.keys(X_AXES).map(k => el('option', {value: k, text: 'against ' + X_AXES[k].name})));
        const ysel = el('select', {id: 'y-column', 'aria-label': 'plotted column'},
                        ...Y_COLUMNS.map(c => el('option', {value: c, text: COLUMNS[c]})));
        const scale = el('select', {id: 'y-scale', 'aria-label': 'y scale'},
                         el('option', {value: 'log', text: 'log scale'}),
                         el('option', {value: 'linear', text: 'linear scale'}));
        xsel.value = choice.xaxis;
        ysel.value = choice.y;
        scale.value = choice.log ? 'log' : 'linear';
        const changed = () => {
            choice.xaxis = xsel.value;
            choice.y = ysel.value;
            choice.log = scale.value === 'log';
            setQuery({x: choice.xaxis === 'rounds' ? '' : choice.xaxis,
                      y: choice.y === 'rel_gap' ? '' : choice.y, scale: choice.log ? '' : 'linear'});
            onchange();
        };
        for (const s of [xsel, ysel, scale]) s.addEventListener('change', changed);
        return [ysel, xsel, scale];
    }

    function chartChoice(q) {
        const x = q.get('x'), y = q.get('y');
        return {xaxis: X_AXES[x] ? x : 'rounds', y: Y_COLUMNS.indexOf(y) >= 0 ? y : 'rel_gap',
                log: q.get('scale') !== 'linear'};
    }

    function saveBlob(blob, name) {
        const url = URL.createObjectURL(blob);
        const a = el('a', {href: url, download: name});
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
    }

    /* A button that fetches path (with the token) and saves the reply. */
    function downloadButton(id, label, pathFn, accept, nameFn) {
        const b = el('button', {class: 'secondary', id: id, type: 'button', text: label});
        b.addEventListener('click', async () => {
            b.disabled = true;
            try {
                const r = await api('GET', pathFn(), undefined, {accept: accept, blob: true});
                if (!r.ok) { notice(problemText(r), true); return; }
                saveBlob(r.doc, nameFn());
            } finally {
                b.disabled = false;
            }
        });
        return b;
    }

    /* The chart as drawn, as a standalone SVG file. */
    function chartSvgButton(chart, nameFn) {
        return el('button', {class: 'secondary', id: 'chart-svg', type: 'button', text: 'This chart (SVG)',
            onclick: () => {
                const c = chart.cloneNode(true);
                c.querySelectorAll('g.hover').forEach(g => g.remove());
                c.setAttribute('xmlns', SVGNS);
                c.setAttribute('width', '760');
                c.setAttribute('height', '380');
                c.removeAttribute('class');
                const text = '<?xml version="1.0" encoding="UTF-8"?>\n' +
                    new XMLSerializer().serializeToString(c) + '\n';
                saveBlob(new Blob([text], {type: 'image/svg+xml'}), nameFn());
            }});
    }

    /* Every metric row of a job after `after`, downsampled by the server to
       about max_points (the chart cannot show more). */
    async function fetchRows(id, after, maxPoints, signal) {
        const out = [];
        for (let page = 0; page < 50; page++) {
            const h = await api('GET', '/v1/jobs/' + encodeURIComponent(id) + '/metrics?limit=' + maxPoints +
                                '&max_points=' + maxPoints + '&after=' + after, undefined, {signal: signal});
            if (!h.ok || !h.doc || !Array.isArray(h.doc.rows)) break;
            out.push(...h.doc.rows);
            if (!h.doc.more || h.doc.next_after <= after) break;
            after = h.doc.next_after;
        }
        return out;
    }

    /* ---- pages ---- */

    let leaveHooks = [];
    function onLeave(f) { leaveHooks.push(f); }

    function stateBadge(state) {
        return el('span', {class: 'badge state-' + state, 'data-state': state, text: state});
    }

    // Why it ended, and its outcome when that says more (docs/api.md, "Outcomes").
    function stopReason(job) {
        if (!job || !job.stop_reason) return null;
        const more = job.outcome && job.outcome !== job.stop_reason ? ' · ' + job.outcome : '';
        return el('div', {class: 'muted stop-reason', 'data-stop': job.stop_reason,
                          'data-outcome': job.outcome || '', text: (job.stop_reason + more).replace(/_/g, ' ')});
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

    /* The selection of the jobs table, kept for the tab so that it survives
       paging, filtering and a visit to the compare view. */
    const SELECT_KEY = 'ecopt.selected';
    function selected() {
        try {
            const v = JSON.parse(sessionStorage.getItem(SELECT_KEY) || '[]');
            return Array.isArray(v) ? v.filter(s => typeof s === 'string') : [];
        } catch (e) {
            return [];
        }
    }
    function setSelected(list) {
        sessionStorage.setItem(SELECT_KEY, JSON.stringify(list.slice(0, 64)));
    }

    /* Sort keys of the jobs table: a value per job, compared as numbers or
       strings; "created" descending is the service's own order. */
    const JOB_SORTS = {
        created: j => j.created_at || 0,
        name: j => (j.name || '').toLowerCase(),
        state: j => j.state,
        algorithm: j => j.algorithm,
        compressor: j => compressorText(j.spec) || j.compressor || '',
        dataset: j => j.dataset,
        workers: j => j.workers,
        round: j => (j.progress && typeof j.progress.round === 'number' ? j.progress.round : null),
        gap: j => (j.progress && typeof j.progress.rel_gap === 'number' ? j.progress.rel_gap : null),
        labels: j => Object.keys(j.labels || {}).sort().map(k => k + '=' + j.labels[k]).join(' '),
        step_multiplier: j => specNumber(j, 'step_multiplier'),
        k: j => (j.spec && j.spec.compressor && typeof j.spec.compressor.k === 'number' ?
                 j.spec.compressor.k : null),
        target: j => specNumber(j, 'target'),
        cpu: j => (j.usage && typeof j.usage.cpu_seconds === 'number' ? j.usage.cpu_seconds : null),
        owner: j => j.owner || '',
    };
    function specNumber(j, key) {
        return j.spec && typeof j.spec[key] === 'number' ? j.spec[key] : null;
    }

    /* A job's labels as links that filter the table by them. */
    function labelChips(j) {
        const lab = j.labels && typeof j.labels === 'object' ? j.labels : {};
        return Object.keys(lab).sort().map(k =>
            el('a', {class: 'chip', 'data-label': k, href: '#/?label=' + encodeURIComponent(k + '=' + lab[k]),
                     text: k + '=' + lab[k]}));
    }

    /* A queued job's place and why it waits, under its state. */
    function waitReason(j) {
        return j.state === 'queued' && typeof j.position === 'number' ?
            el('div', {class: 'muted stop-reason wait', 'data-wait': j.reason || '',
                       title: 'number ' + j.position + ' in the queue',
                       text: '#' + j.position + ' ' + (j.reason || '').replace(/_/g, ' ')}) : null;
    }

    /*
     * The jobs table's columns after the id: their header, cell and sort
     * key; the user chooses which are shown (cols= in the address),
     * DEFAULT_COLUMNS unless.
     */
    const TABLE_COLUMNS = [
        {key: 'state', title: 'State', cell: j => el('td', {}, stateBadge(j.state), stopReason(j), waitReason(j))},
        {key: 'algorithm', title: 'Algorithm', cell: j => el('td', {text: j.algorithm})},
        {key: 'compressor', title: 'Compressor', cell: j => el('td', {text: compressorText(j.spec) || j.compressor})},
        {key: 'dataset', title: 'Dataset', cell: j => el('td', {text: j.dataset})},
        {key: 'workers', title: 'Workers', num: true, cell: j => el('td', {class: 'num', text: j.workers})},
        {key: 'step_multiplier', title: 'Step ×', num: true,
         cell: j => el('td', {class: 'num', text: fmtValue(specNumber(j, 'step_multiplier'))})},
        {key: 'k', title: 'k', num: true, cell: j => el('td', {class: 'num', text: fmtValue(JOB_SORTS.k(j))})},
        {key: 'round', title: 'Progress (rounds)', num: true, cell: j => progressCell(j)},
        {key: 'gap', title: 'Gap', num: true,
         cell: j => el('td', {class: 'num gap', text: fmtGap(j.progress && j.progress.rel_gap)})},
        {key: 'target', title: 'Target', num: true, cell: j => el('td', {class: 'num', text: fmtGap(specNumber(j, 'target'))})},
        {key: 'cpu', title: 'CPU s', num: true, cell: j => el('td', {class: 'num', text: fmtValue(JOB_SORTS.cpu(j))})},
        {key: 'owner', title: 'Owner', cell: j => el('td', {text: j.owner || ''})},
        {key: 'name', title: 'Name', cell: j => el('td', {class: 'name', text: j.name || ''})},
        {key: 'labels', title: 'Labels', cell: j => el('td', {class: 'labels'}, ...labelChips(j))},
    ];
    const DEFAULT_COLUMNS = ['state', 'algorithm', 'compressor', 'dataset', 'workers', 'round', 'gap', 'name',
                             'labels'];
    /* Sorts jobs by key in dir; a job without a value goes last either
       way, ties keep the service's order. */
    function sortJobs(jobs, key, dir) {
        const sign = dir === 'asc' ? 1 : -1;
        return jobs.map((j, i) => [key(j), i, j]).sort((a, b) => {
            if (a[0] === b[0]) return a[1] - b[1];
            if (a[0] === null) return 1;
            if (b[0] === null) return -1;
            return (a[0] < b[0] ? -1 : 1) * sign;
        }).map(e => e[2]);
    }
    const SCAN_PAGES = 20;    /* pages of 500 read to sort or to match a name: 10000 jobs */

    async function pageJobs(main, q) {
        const vocab = await loadVocabulary();
        const STOP_REASONS = namesOf(vocab.stop_reasons), ALGORITHMS = namesOf(vocab.algorithms);
        const view = {
            state: q.get('state') || '', algorithm: q.get('algorithm') || '',
            dataset: q.get('dataset') || '', label: q.get('label') || '', name: q.get('name') || '',
            stop_reason: STOP_REASONS.indexOf(q.get('stop_reason')) >= 0 ? q.get('stop_reason') : '',
            sort: JOB_SORTS[q.get('sort')] ? q.get('sort') : 'created',
            dir: q.get('dir') === 'asc' ? 'asc' : q.get('dir') === 'desc' ? 'desc' : '',
            limit: [10, 25, 50, 100, 500].indexOf(Number(q.get('limit'))) >= 0 ? Number(q.get('limit')) : 50,
            filter: q.get('filter') || '',
            cols: (q.get('cols') || '').split(',').filter(c => TABLE_COLUMNS.some(t => t.key === c)),
        };
        if (!view.cols.length) view.cols = DEFAULT_COLUMNS.slice();
        if (!view.dir) view.dir = view.sort === 'created' || view.sort === 'round' ? 'desc' : 'asc';
        /* Server paging: cursors[i] is the cursor of page i (null for the
           first). Scan paging (another sort, or a name): all matching jobs,
           paged here. */
        let cursors = [null], pageNo = 0, nextCursor = null, scanned = [], busy = false, timer = null;
        const serverOrder = () => view.sort === 'created' && view.dir === 'desc' && !view.name;

        const opt = (v, t) => el('option', {value: v, text: t});
        const fState = el('select', {id: 'state-filter', 'aria-label': 'state'}, opt('', 'all states'),
                          ...['queued', 'running'].concat(FINAL).map(s => opt(s, s)));
        const fStop = el('select', {id: 'stop-filter', 'aria-label': 'stop reason'}, opt('', 'any stop reason'),
                         ...STOP_REASONS.map(s => opt(s, s.replace(/_/g, ' '))));
        const fAlgo = el('select', {id: 'algorithm-filter', 'aria-label': 'algorithm'},
                         opt('', 'all algorithms'), ...ALGORITHMS.map(a => opt(a, a)));
        const fData = el('select', {id: 'dataset-filter', 'aria-label': 'dataset'}, opt('', 'all datasets'));
        if (view.dataset) fData.append(opt(view.dataset, view.dataset));
        const fLabel = el('input', {id: 'label-filter', placeholder: 'label KEY or KEY=VALUE', size: 18,
                                    'aria-label': 'label'});
        const fName = el('input', {id: 'name-filter', placeholder: 'name contains', size: 14,
                                   'aria-label': 'name', type: 'search'});
        const fLimit = el('select', {id: 'page-size', 'aria-label': 'jobs per page'},
                          ...[10, 25, 50, 100, 500].map(n => opt(String(n), n + ' per page')));
        fState.value = view.state; fStop.value = view.stop_reason; fAlgo.value = view.algorithm; fData.value = view.dataset;
        const fFilter = el('input', {id: 'param-filter', size: 30, 'aria-label': 'filters on parameters and results',
                                     placeholder: 'k=5 reached=true rel_gap_lt=1e-6',
                                     title: 'FIELD[_ne|_lt|_le|_gt|_ge]=VALUE, separated by spaces: the API\'s filters'});
        fLabel.value = view.label; fName.value = view.name; fLimit.value = String(view.limit);
        fFilter.value = view.filter;
        /* Which columns: a checkbox each, in a pop-down. */
        const colBoxes = TABLE_COLUMNS.map(c => {
            const box = el('input', {type: 'checkbox', 'data-col': c.key});
            box.checked = view.cols.indexOf(c.key) >= 0;
            box.addEventListener('change', () => {
                view.cols = TABLE_COLUMNS.filter((t, i) => colBoxes[i].checked).map(t => t.key);
                buildHead();
                keepQuery();
                render(lastRows);
            });
            return box;
        });
        const colChooser = el('details', {class: 'columns', id: 'columns'}, el('summary', {text: 'Columns'}),
                              ...TABLE_COLUMNS.map((c, i) => el('label', {}, colBoxes[i], ' ' + c.title)));
        const clear = el('button', {class: 'secondary', id: 'clear-filters', type: 'button', text: 'Clear'});
        const status = el('span', {class: 'muted', id: 'jobs-status'});
        const prev = el('button', {class: 'secondary', id: 'page-prev', type: 'button', text: '‹ Newer'});
        const next = el('button', {class: 'secondary', id: 'page-next', type: 'button', text: 'Older ›'});
        const pageInfo = el('span', {class: 'muted', id: 'page-info'});
        const selInfo = el('span', {id: 'selection'});
        const compare = el('button', {id: 'compare-selected', type: 'button', text: 'Compare selected'});
        const unselect = el('button', {class: 'secondary', id: 'clear-selection', type: 'button', text: 'Unselect'});
        const all = el('input', {type: 'checkbox', id: 'select-page', 'aria-label': 'select this page'});
        const tbody = el('tbody');
        const heads = {};
        const th = (key, text, num) => {
            const h = el('th', {class: 'sortable' + (num ? ' num' : ''), 'data-sort': key, tabindex: 0,
                                title: 'sort by ' + text.toLowerCase()}, text);
            const toggle = () => {
                if (view.sort === key) view.dir = view.dir === 'asc' ? 'desc' : 'asc';
                else { view.sort = key; view.dir = key === 'created' || key === 'round' ? 'desc' : 'asc'; }
                reset();
            };
            h.addEventListener('click', toggle);
            h.addEventListener('keydown', e => { if (e.key === 'Enter') toggle(); });
            heads[key] = h;
            return h;
        };
        const headRow = el('tr');
        function buildHead() {
            for (const k in heads) delete heads[k];
            headRow.replaceChildren(el('th', {class: 'pick'}, all), th('created', 'Job'),
                ...TABLE_COLUMNS.filter(c => view.cols.indexOf(c.key) >= 0).map(c => th(c.key, c.title, c.num)));
            showSort();
        }
        main.append(
            el('h1', {text: 'Jobs'}),
            el('div', {class: 'toolbar', id: 'filters'}, fState, fStop, fAlgo, fData, fLabel, fName, fLimit, clear,
               el('span', {class: 'grow'}),
               el('a', {href: '#/submit'}, el('button', {type: 'button', text: 'New job'}))),
            el('div', {class: 'toolbar'}, fFilter, colChooser),
            el('div', {class: 'toolbar'}, status, el('span', {class: 'grow'}), selInfo, compare, unselect),
            el('table', {id: 'jobs'}, el('thead', {}, headRow), tbody),
            el('div', {class: 'toolbar pager'}, prev, pageInfo, next));
        buildHead();

        function showSelection() {
            const s = selected();
            selInfo.textContent = s.length ? s.length + ' selected' : 'select jobs to compare them';
            selInfo.className = s.length ? '' : 'muted';
            compare.disabled = s.length < 2 || s.length > 32;
            unselect.hidden = !s.length;
        }
        compare.addEventListener('click', () => {
            location.hash = '#/compare?jobs=' + selected().join(',');
        });
        unselect.addEventListener('click', () => { setSelected([]); render(lastRows); });

        function showSort() {
            for (const k in heads) {
                const on = k === view.sort;
                heads[k].setAttribute('aria-sort', on ? (view.dir === 'asc' ? 'ascending' : 'descending') : 'none');
                heads[k].classList.toggle('sorted', on);
                heads[k].setAttribute('data-dir', on ? view.dir : '');
            }
        }

        function keepQuery() {
            setQuery({state: view.state, stop_reason: view.stop_reason, algorithm: view.algorithm, dataset: view.dataset, label: view.label,
                      name: view.name, sort: view.sort === 'created' ? '' : view.sort,
                      dir: view.sort === 'created' && view.dir === 'desc' ? '' : view.dir,
                      limit: view.limit === 50 ? '' : String(view.limit), filter: view.filter,
                      cols: view.cols.join(',') === DEFAULT_COLUMNS.join(',') ? '' : view.cols.join(',')});
        }

        /* The API's filters as typed, FIELD=VALUE separated by spaces; the
           service says what is wrong with one (a 400 naming it). */
        function filterQuery() {
            let s = '';
            for (const k of ['state', 'stop_reason', 'algorithm', 'dataset', 'label'])
                if (view[k]) s += '&' + k + '=' + encodeURIComponent(view[k]);
            for (const f of view.filter.split(/\s+/).filter(f => f)) {
                const eq = f.indexOf('=');
                s += '&' + encodeURIComponent(eq < 0 ? f : f.slice(0, eq)) +
                     (eq < 0 ? '' : '=' + encodeURIComponent(f.slice(eq + 1)));
            }
            return s;
        }

        let lastRows = [];
        function render(jobs) {
            lastRows = jobs;
            const sel = selected();
            tbody.replaceChildren(...jobs.map(j => {
                const box = el('input', {type: 'checkbox', class: 'pick', 'aria-label': 'select ' + j.id,
                                         'data-job': j.id});
                box.checked = sel.indexOf(j.id) >= 0;
                box.addEventListener('change', () => {
                    const s = selected().filter(x => x !== j.id);
                    if (box.checked) s.push(j.id);
                    setSelected(s);
                    showSelection();
                    all.checked = false;
                });
                return el('tr', {'data-job': j.id, 'data-state': j.state, class: box.checked ? 'picked' : ''},
                    el('td', {class: 'pick'}, box),
                    el('td', {}, el('a', {href: '#/jobs/' + j.id, class: 'mono', text: j.id}),
                       el('div', {class: 'muted', text: fmtTime(j.created_at)})),
                    ...TABLE_COLUMNS.filter(c => view.cols.indexOf(c.key) >= 0).map(c => c.cell(j)));
            }));
            if (!jobs.length)
                tbody.append(el('tr', {}, el('td', {colspan: view.cols.length + 2, class: 'muted',
                    text: filterQuery() || view.name ? 'No job matches these filters' +
                        (nextCursor ? ' among the newest: older ones may, see the next page.' : '.') :
                        'No jobs yet: submit one.'})));
            showSelection();
            showSort();
        }

        async function refresh() {
            if (busy) return;
            busy = true;
            try {
                if (serverOrder()) await refreshServer();
                else await refreshScan();
            } finally {
                busy = false;
            }
        }

        async function refreshServer() {
            const c = cursors[pageNo];
            const r = await api('GET', '/v1/jobs?limit=' + view.limit + filterQuery() +
                                (c ? '&cursor=' + encodeURIComponent(c) : ''));
            if (!r.ok) { status.textContent = problemText(r); status.className = 'problem'; return; }
            status.className = 'muted';
            nextCursor = r.doc.next_cursor || null;
            const first = pageNo * view.limit + 1;
            status.textContent = r.doc.jobs.length ?
                'jobs ' + first + '–' + (first + r.doc.jobs.length - 1) + (nextCursor ? ', more after these' : '') :
                'no jobs';
            pageInfo.textContent = 'page ' + (pageNo + 1);
            prev.disabled = pageNo === 0;
            next.disabled = !nextCursor;
            render(r.doc.jobs);
        }

        async function refreshScan() {
            const jobs = [];
            let cursor = null, capped = false;
            for (let p = 0; ; p++) {
                if (p === SCAN_PAGES) { capped = true; break; }
                const r = await api('GET', '/v1/jobs?limit=500' + filterQuery() +
                                    (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
                if (!r.ok) { status.textContent = problemText(r); status.className = 'problem'; return; }
                jobs.push(...r.doc.jobs);
                cursor = r.doc.next_cursor;
                if (!cursor) break;
            }
            const needle = view.name.toLowerCase();
            scanned = needle ? jobs.filter(j => (j.name || '').toLowerCase().indexOf(needle) >= 0) : jobs;
            scanned = sortJobs(scanned, JOB_SORTS[view.sort], view.dir);
            const pages = Math.max(1, Math.ceil(scanned.length / view.limit));
            if (pageNo >= pages) pageNo = pages - 1;
            const rows = scanned.slice(pageNo * view.limit, (pageNo + 1) * view.limit);
            status.className = 'muted';
            status.textContent = scanned.length + ' job' + (scanned.length === 1 ? '' : 's') +
                (needle ? ' named like "' + view.name + '"' : '') + ', sorted by ' + view.sort +
                (capped ? ' (among the newest ' + jobs.length + ' only)' : '');
            pageInfo.textContent = 'page ' + (pageNo + 1) + ' of ' + pages;
            prev.disabled = pageNo === 0;
            next.disabled = pageNo + 1 >= pages;
            render(rows);
        }

        function reset() {
            cursors = [null];
            pageNo = 0;
            keepQuery();
            schedule();
            refresh();
        }
        function schedule() {
            if (timer) clearInterval(timer);
            timer = setInterval(refresh, serverOrder() ? 2000 : 5000);
        }
        prev.addEventListener('click', () => {
            if (pageNo === 0) return;
            pageNo--;
            if (serverOrder()) cursors.length = pageNo + 1;
            refresh();
        });
        next.addEventListener('click', () => {
            if (serverOrder()) {
                if (!nextCursor) return;
                cursors[pageNo + 1] = nextCursor;
            }
            pageNo++;
            refresh();
        });
        all.addEventListener('change', () => {
            let s = selected().filter(id => !lastRows.some(j => j.id === id));
            if (all.checked) s = s.concat(lastRows.map(j => j.id));
            setSelected(s);
            render(lastRows);
        });
        const set = (k, v) => { if (view[k] !== v) { view[k] = v; reset(); } };
        fState.addEventListener('change', () => set('state', fState.value));
        fStop.addEventListener('change', () => set('stop_reason', fStop.value));
        fAlgo.addEventListener('change', () => set('algorithm', fAlgo.value));
        fData.addEventListener('change', () => set('dataset', fData.value));
        fLimit.addEventListener('change', () => set('limit', Number(fLimit.value)));
        let typing = null;
        for (const [input, key] of [[fLabel, 'label'], [fName, 'name'], [fFilter, 'filter']]) {
            input.addEventListener('input', () => {
                clearTimeout(typing);
                typing = setTimeout(() => set(key, input.value.trim()), 350);
            });
            input.addEventListener('keydown', e => {
                if (e.key === 'Enter') { clearTimeout(typing); set(key, input.value.trim()); }
            });
        }
        clear.addEventListener('click', () => {
            for (const [input, key] of [[fState, 'state'], [fStop, 'stop_reason'], [fAlgo, 'algorithm'], [fData, 'dataset'],
                                        [fLabel, 'label'], [fName, 'name'], [fFilter, 'filter']]) {
                input.value = '';
                view[key] = '';
            }
            reset();
        });
        onLeave(() => { if (timer) clearInterval(timer); clearTimeout(typing); });
        await refresh();
        schedule();
        const d = await api('GET', '/v1/datasets');
        if (d.ok && d.doc && Array.isArray(d.doc.datasets))
            for (const s of d.doc.datasets)
                if (!s.error && s.name !== view.dataset) fData.append(opt(s.name, s.name));
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

    /* The spec as the user would write it: keys the service echoes as null
       (not given, and with no default) are left out. */
    function specText(spec) {
        const drop = (k, v) => (v === null ? undefined : v);
        return JSON.stringify(spec, drop, 2);
    }

    async function pageJob(main, id, q) {
        const ctl = new AbortController();
        onLeave(() => ctl.abort());
        const r = await api('GET', '/v1/jobs/' + encodeURIComponent(id));
        if (!r.ok) {
            main.append(el('h1', {text: 'Job ' + id}), el('p', {class: 'problem', text: problemText(r)}));
            return;
        }
        let job = r.doc;
        const rows = [];
        const choice = chartChoice(q);
        let lastRound = -1, pending = false;

        const badge = el('span', {id: 'job-state'});
        const reason = el('p', {class: 'muted', id: 'job-reason'});
        const facts = el('div', {class: 'facts', id: 'job-facts'});
        const chart = svg('svg', {class: 'chart', id: 'chart', role: 'img', 'aria-label': 'the job\'s curve'});
        const title = el('b', {text: 'Plot'});
        const live = el('span', {class: 'muted', id: 'live'});
        const cancel = el('button', {class: 'danger', id: 'cancel', text: 'Cancel',
            onclick: async () => {
                cancel.disabled = true;
                const c = await api('POST', '/v1/jobs/' + id + '/cancel', {});
                if (!c.ok) notice(problemText(c), true);
            }});
        /* Every row: the service streams them all when no limit is asked. */
        const csv = downloadButton('download-csv', 'CSV (every row)',
                                   () => '/v1/jobs/' + encodeURIComponent(id) + '/metrics?format=csv',
                                   'text/csv', () => id + '.csv');
        const plotSvg = downloadButton('download-svg', 'Plot (SVG)',
                                       () => '/v1/jobs/' + encodeURIComponent(id) + '/plot.svg?x=' + choice.xaxis,
                                       'image/svg+xml', () => id + '-' + choice.xaxis + '.svg');
        plotSvg.title = 'the service\'s plot of the relative gap against the chosen x';
        const params = el('div');
        const problem = el('div');
        const labels = el('p', {class: 'labels', id: 'job-labels'});
        const retry = el('button', {class: 'secondary', id: 'retry', type: 'button', text: 'Retry',
                                    title: 'submit the same spec again, as a new job',
            onclick: async () => {
                retry.disabled = true;
                const c = await api('POST', '/v1/jobs/' + encodeURIComponent(id) + '/retry');
                retry.disabled = false;
                if (c.ok && c.doc && c.doc.id) location.hash = '#/jobs/' + c.doc.id;
                else notice(problemText(c), true);
            }});
        const log = el('pre', {class: 'mono log', id: 'job-log', text: 'loading…'});
        const logInfo = el('span', {class: 'muted', id: 'log-info'});
        const vocab = await loadVocabulary();
        const waitMeaning = {};
        for (const w of vocab.queue_reasons || []) waitMeaning[w.name] = w.meaning;

        async function refreshLog() {
            const l = await api('GET', '/v1/jobs/' + encodeURIComponent(id) + '/log', undefined,
                                {accept: 'text/plain', signal: ctl.signal});
            if (l.ok) {
                const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
                log.textContent = typeof l.doc === 'string' && l.doc ? l.doc : '(empty)';
                if (atEnd) log.scrollTop = log.scrollHeight;
                logInfo.textContent = l.headers && l.headers.get('X-Log-Truncated') ?
                    'the last 4 MiB' : '';
            } else {
                log.textContent = l.status === 404 ? 'no log yet: the job has not started' : problemText(l);
            }
        }

        function showFacts(p) {
            const set = (fid, text) => { const e = document.getElementById(fid); if (e) e.textContent = text; };
            set('fact-round', typeof p.round === 'number' ? String(p.round) : '–');
            set('fact-gap', fmtGap(p.rel_gap));
            set('fact-bits', fmtCount(p.bits_up));
        }

        function showJob() {
            badge.replaceChildren(stateBadge(job.state));
            /* A queued job: its place and why it waits; an ended one: why
               it ended. */
            reason.textContent = job.state === 'queued' && typeof job.position === 'number' ?
                'waiting: number ' + job.position + ' in the queue — ' +
                (job.reason || '').replace(/_/g, ' ') +
                (waitMeaning[job.reason] ? ': ' + waitMeaning[job.reason] : '') : job.reason || '';
            reason.hidden = !reason.textContent;
            reason.setAttribute('data-wait', job.state === 'queued' ? job.reason || '' : '');
            cancel.hidden = FINAL.indexOf(job.state) >= 0;
            retry.hidden = FINAL.indexOf(job.state) < 0;
            const lab = job.labels && typeof job.labels === 'object' ? job.labels : {};
            labels.replaceChildren(...Object.keys(lab).map(k =>
                el('a', {class: 'chip', 'data-label': k, href: '#/?label=' + encodeURIComponent(k + '=' + lab[k]),
                         title: 'jobs with this label', text: k + '=' + lab[k]})));
            labels.hidden = !Object.keys(lab).length;
            const u = job.usage || {};
            const p = job.progress || {};
            const fact = (k, v) => el('div', {}, el('span', {text: k}), v);
            facts.replaceChildren(...[
                fact('dataset', job.dataset), fact('algorithm', job.algorithm),
                fact('compressor', compressorText(job.spec) || job.compressor),
                job.spec && job.spec.compressor_down && job.spec.compressor_down.type !== 'none' ?
                    fact('broadcast (EF21-P)', el('b', {id: 'fact-down',
                                                        text: compressorText(job.spec, 'compressor_down')})) : null,
                job.spec && typeof job.spec.participation === 'number' && job.spec.participation < 1 ?
                    fact('participation', el('b', {id: 'fact-participation',
                                                   text: String(job.spec.participation)})) : null,
                fact('workers', String(job.workers)), fact('backend', job.backend),
                fact('round', el('b', {id: 'fact-round'})),
                fact('relative gap', el('b', {id: 'fact-gap'})),
                fact('bits up per worker', el('b', {id: 'fact-bits'})),
                job.stop_reason ? fact('stop reason', el('b', {id: 'fact-stop', text: job.stop_reason})) : null,
                job.state === 'queued' && typeof job.position === 'number' ?
                    fact('place in the queue', el('b', {id: 'fact-position', text: '#' + job.position})) : null,
                fact('CPU seconds', el('b', {id: 'fact-cpu', text: typeof u.cpu_seconds === 'number' ?
                    u.cpu_seconds.toFixed(2) : FINAL.indexOf(job.state) >= 0 ? '–' : 'once ended'})),
                fact('peak memory (largest process / sum)', el('b', {id: 'fact-mem', text:
                    typeof u.max_rss_bytes === 'number' ? fmtBytes(u.max_rss_bytes) + ' / ' +
                    (typeof u.rss_sum_bytes === 'number' ? fmtBytes(u.rss_sum_bytes) : '–') :
                    FINAL.indexOf(job.state) >= 0 ? '–' : 'once ended'})),
                job.retry_of ? fact('retry of', el('a', {id: 'fact-retry-of', class: 'mono',
                                                          href: '#/jobs/' + job.retry_of, text: job.retry_of})) : null,
                fact('created', fmtTime(job.created_at)),
                fact('finished', fmtTime(job.finished_at))].filter(f => f));
            /* The newest of the job's progress and the rows seen. */
            const seen = rows.length ? rows[rows.length - 1] : null;
            showFacts(seen && (typeof p.round !== 'number' || seen.round >= p.round) ? seen : p);
            params.replaceChildren(kvTable(job.params, 'params'));
            problem.replaceChildren(kvTable(job.problem, 'problem'));
        }

        function redraw() {
            pending = false;
            const target = job.spec && typeof job.spec.target === 'number' ? job.spec.target : undefined;
            drawChart(chart, [{label: job.name || job.id, color: PALETTE[0], rows: rows}],
                      {x: X_AXES[choice.xaxis].col, y: choice.y, log: choice.log, target: target});
        }

        function addRow(m) {
            if (typeof m.round !== 'number' || m.round <= lastRound) return;
            rows.push(m);
            lastRound = m.round;
            showFacts(m);
            if (!pending) {
                pending = true;
                requestAnimationFrame(redraw);
            }
        }

        main.append(
            el('h1', {}, 'Job ', el('span', {class: 'mono', text: job.id}), ' ', badge), reason,
            /* An unnamed job has no line here (append() would print "null"). */
            el('p', {class: 'muted', id: 'job-name', text: job.name || '', hidden: !job.name}),
            labels,
            el('div', {class: 'card'}, facts),
            el('div', {class: 'card'},
               el('div', {class: 'toolbar'}, title, ...chartControls(choice, redraw), live,
                  el('span', {class: 'grow'}), csv, plotSvg, chartSvgButton(chart, () => id + '-chart.svg'), cancel,
                  retry),
               el('div', {class: 'chart-wrap'}, chart)),
            el('div', {class: 'card'},
               el('div', {class: 'toolbar'}, el('b', {text: 'Log'}), logInfo, el('span', {class: 'grow'}),
                  el('button', {class: 'secondary', id: 'log-refresh', type: 'button', text: 'Refresh',
                                onclick: refreshLog})),
               log),
            el('div', {class: 'grid2'},
               el('div', {}, el('h2', {text: 'Resolved parameters'}), params),
               el('div', {}, el('h2', {text: 'Problem'}), problem)),
            el('h2', {text: 'Spec'}), el('pre', {class: 'mono', id: 'spec', text: specText(job.spec)}));
        showJob();
        redraw();
        refreshLog();

        /* History first (downsampled to what the chart can show), then
           the live rows after it. */
        (await fetchRows(id, -1, 2000, ctl.signal)).forEach(addRow);

        async function refreshJob() {
            const j = await api('GET', '/v1/jobs/' + id, undefined, {signal: ctl.signal});
            if (j.ok) { job = j.doc; showJob(); }
        }
        /* A queued job's place moves without an event; the log grows. */
        const poll = setInterval(() => {
            if (job.state === 'queued') refreshJob();
            if (FINAL.indexOf(job.state) < 0) refreshLog();
        }, 2000);
        onLeave(() => clearInterval(poll));
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
            refreshLog();
        }
    }

    /*
     * A comparison: the table of rounds, bits and seconds to target and the
     * overlaid curves, for an experiment or for any jobs. load() resolves to
     * the API's reply ({comparison, jobs, ...}); plotPath(x) is the
     * service's SVG of the same curves.
     */
    async function comparisonView(main, q, load, plotPath, fileName) {
        const ctl = new AbortController();
        onLeave(() => ctl.abort());
        const choice = chartChoice(q);
        const status = el('span', {class: 'muted', id: 'compare-status'});
        const chart = svg('svg', {class: 'chart', id: 'compare-chart', role: 'img',
                                  'aria-label': 'the compared curves'});
        const title = el('b', {text: 'Compared'});
        const tbody = el('tbody');
        /* A tuned experiment's variants: the default run beside the best. */
        const tunedBody = el('tbody');
        const tunedTable = el('table', {id: 'tuned', hidden: ''},
            el('thead', {}, el('tr', {}, ...['Variant', 'Default: rounds / bits / s', 'Best multiplier',
                                              'Best: rounds / bits / s', 'Runs']
                .map(t => el('th', {text: t})))),
            tunedBody);
        const runText = r => r && r.reached
            ? fmtValue(r.rounds_to_target) + ' / ' + fmtCount(r.bits_up_to_target) + ' / ' +
              fmtValue(r.seconds_to_target)
            : 'not reached';
        const curves = new Map();   /* job id -> {rows, last} */
        let order = [], jobsById = {}, timer = null, rowsById = {}, style = {}, target;
        /* All runs, or the best run of each variant: of those that reached
           the target the fewest rounds (ties: fewer bits up), else the
           lowest final gap. */
        let runs = ['best', 'seeds'].indexOf(q.get('runs')) >= 0 ? q.get('runs') : 'all';
        const seedsOption = el('option', {value: 'seeds', text: 'median of the seeds', hidden: ''});
        const runsPick = el('select', {id: 'runs-view', 'aria-label': 'which runs'},
                            el('option', {value: 'all', text: 'every run'}),
                            el('option', {value: 'best', text: 'best run per variant'}), seedsOption);
        let seedGroups = [];    /* the service's groups of runs that differ by seed alone */
        runsPick.value = runs;
        const better = (a, b) => !b ||
            (a.reached && (!b.reached || a.rounds_to_target < b.rounds_to_target ||
                           (a.rounds_to_target === b.rounds_to_target && a.bits_up_to_target < b.bits_up_to_target))) ||
            (!a.reached && !b.reached && typeof a.final_rel_gap === 'number' &&
             (typeof b.final_rel_gap !== 'number' || a.final_rel_gap < b.final_rel_gap));
        const shown = () => {
            if (runs !== 'best') return order;
            const best = {};
            for (const id of order) {
                const c = rowsById[id];
                if (better(c, best[c.variant])) best[c.variant] = c;
            }
            return order.filter(id => best[rowsById[id].variant] === rowsById[id]);
        };
        /* Per group of seeds, one curve: at each evaluation point the
           median of its runs (a run that stopped is read at its last row,
           as plot.svg does), and a band from their least to greatest. */
        const median = v => {
            const a = v.slice().sort((p, q) => p - q), m = a.length >> 1;
            return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2;
        };
        const seedSeries = () => seedGroups.filter(g => g.jobs && g.jobs.length > 1).map(g => {
            const xcol = X_AXES[choice.xaxis].col, ycol = choice.y;
            const lists = g.jobs.map(id => (curves.get(id) || {rows: []}).rows).filter(l => l.length);
            const n = Math.max(0, ...lists.map(l => l.length)), rows = [], band = [];
            for (let i = 0; i < n; i++) {
                const at = lists.map(l => l[Math.min(i, l.length - 1)]);
                const xs = at.map(r => rowValue(r, xcol)), ys = at.map(r => rowValue(r, ycol));
                if (xs.some(v => isNaN(v)) || ys.some(v => isNaN(v))) continue;
                const row = {round: median(at.map(r => r.round))};
                row[xcol] = median(xs);
                row[ycol] = median(ys);
                rows.push(row);
                band.push({x: row[xcol], lo: Math.min(...ys), hi: Math.max(...ys)});
            }
            const st = style[g.jobs[0]] || {color: PALETTE[0]};
            const c = rowsById[g.jobs[0]];
            return {label: (c ? c.label.replace(/ s=\d+$/, '') : g.jobs[0]) + ': median of ' +
                        g.jobs.length + ' seeds',
                    color: st.color, dash: st.dash, group: st.group, rows: rows, band: band};
        });
        const seriesOf = () => runs === 'seeds' && seedGroups.some(g => g.jobs && g.jobs.length > 1) ? seedSeries() : shown().map(id => ({
            label: rowsById[id] ? rowsById[id].label : id, color: style[id].color, dash: style[id].dash,
            group: style[id].group, rows: (curves.get(id) || {rows: []}).rows}));
        const redraw = () => {
            drawChart(chart, seriesOf(), {x: X_AXES[choice.xaxis].col, y: choice.y, log: choice.log,
                                          target: target});
            const keep = new Set(shown());
            tbody.querySelectorAll('tr[data-job]').forEach(tr => {
                tr.hidden = !keep.has(tr.getAttribute('data-job'));
            });
        };
        runsPick.addEventListener('change', () => {
            runs = runsPick.value;
            setQuery({runs: runs === 'all' ? '' : runs});
            redraw();
        });
        /* A line in the curve's colour and dash, for the table. */
        const swatch = st => {
            const g = svg('svg', {width: 28, height: 10, class: 'swatch-line', 'data-group': String(st.group)});
            const line = svg('line', {x1: 1, y1: 5, x2: 27, y2: 5, stroke: st.color, 'stroke-width': 2.5});
            if (st.dash) line.setAttribute('stroke-dasharray', st.dash);
            g.append(line);
            return g;
        };
        const plotSvg = downloadButton('download-svg', 'Plot (SVG)', () => plotPath(choice.xaxis),
                                       'image/svg+xml', () => fileName + '-' + choice.xaxis + '.svg');
        plotSvg.title = 'the service\'s plot of the relative gaps against the chosen x';
        main.append(
            el('div', {class: 'card'},
               el('div', {class: 'toolbar'}, title, ...chartControls(choice, redraw), runsPick, status,
                  el('span', {class: 'grow'}), plotSvg, chartSvgButton(chart, () => fileName + '-chart.svg')),
               el('div', {class: 'chart-wrap'}, chart)),
            el('table', {id: 'comparison'},
               el('thead', {}, el('tr', {}, el('th', {}), ...['Job', 'Run', 'Name', 'State', 'Reached target']
                   .map(t => el('th', {text: t})),
                   ...['Rounds to target', 'Bits up to target', 'Seconds to target', 'Rounds', 'Final gap']
                   .map(t => el('th', {class: 'num', text: t})))),
               tbody),
            tunedTable);

        async function refresh() {
            const r = await load(ctl.signal);
            if (!r.ok) {
                status.textContent = problemText(r);
                status.className = 'problem';
                return false;
            }
            status.textContent = '';
            const doc = r.doc;
            jobsById = {};
            for (const j of doc.jobs || []) jobsById[j.id] = j;
            seedGroups = doc.groups || [];
            seedsOption.hidden = !seedGroups.some(g => g.jobs && g.jobs.length > 1);
            order = doc.comparison.map(c => c.job);
            /* One colour per variant, one dash per run of it. */
            rowsById = {};
            style = {};
            const groups = [], members = {};
            for (const c of doc.comparison) {
                const v = c.variant || c.job;
                c.variant = v;
                c.label = c.label || v;
                rowsById[c.job] = c;
                if (groups.indexOf(v) < 0) groups.push(v);
                const g = groups.indexOf(v), k = members[v] = (members[v] || 0) + 1;
                style[c.job] = {group: g, color: PALETTE[g % PALETTE.length], dash: DASHES[(k - 1) % DASHES.length]};
            }
            const targets = doc.comparison.map(c => c.target).filter(t => typeof t === 'number');
            target = targets.length && targets.every(t => t === targets[0]) ? targets[0] : undefined;
            tbody.replaceChildren(...doc.comparison.map(c => {
                const j = jobsById[c.job] || {};
                return el('tr', {'data-job': c.job, 'data-variant': c.variant},
                    el('td', {}, swatch(style[c.job])),
                    el('td', {}, el('a', {href: '#/jobs/' + c.job, class: 'mono', text: c.job})),
                    el('td', {class: 'run-label', text: c.label}),
                    el('td', {text: j.name || ''}),
                    el('td', {}, stateBadge(c.state), stopReason(c.stop_reason ? c : j)),
                    el('td', {class: 'reached', text: c.reached ? 'yes' : 'no'}),
                    el('td', {class: 'num', text: fmtValue(c.rounds_to_target)}),
                    el('td', {class: 'num', text: fmtCount(c.bits_up_to_target)}),
                    el('td', {class: 'num', text: fmtValue(c.seconds_to_target)}),
                    el('td', {class: 'num', text: fmtValue(c.rounds)}),
                    el('td', {class: 'num', text: fmtGap(c.final_rel_gap)}));
            }));
            tunedTable.hidden = !doc.tuned;
            tunedBody.replaceChildren(...(doc.tuned || []).map(t => el('tr', {},
                el('td', {text: t.algorithm + ' (' + t.variant + ')'}),
                el('td', {text: runText(t.default)}),
                el('td', {text: t.best ? 'x' + t.best.multiplier + ' (' + t.best.axis.replace('_multiplier', '') + ')' : '-'}),
                el('td', {text: t.best ? runText(t.best) : t.detail}),
                el('td', {text: t.finished + ' of ' + t.runs + ' finished'}))));
            /* Each curve from its rows: all of them once, then those after
               the last seen while the job runs. */
            await Promise.all(order.map(async id => {
                let c = curves.get(id);
                if (!c) { c = {rows: [], done: false}; curves.set(id, c); }
                if (c.done) return;
                const after = c.rows.length ? c.rows[c.rows.length - 1].round : -1;
                const more = await fetchRows(id, after, 1000, ctl.signal);
                c.rows.push(...more);
                const j = jobsById[id];
                if (j && FINAL.indexOf(j.state) >= 0) c.done = true;
            }));
            redraw();
            return doc.comparison.some(c => FINAL.indexOf(c.state) < 0);
        }
        redraw();
        if (await refresh()) {
            timer = setInterval(async () => { if (!(await refresh())) clearInterval(timer); }, 3000);
            onLeave(() => clearInterval(timer));
        }
        return true;
    }

    async function pageExperiment(main, id, q) {
        const title = el('h1', {id: 'experiment-title'}, 'Experiment ', el('span', {class: 'mono', text: id}));
        main.append(title);
        const path = '/v1/experiments/' + encodeURIComponent(id);
        await comparisonView(main, q, async signal => {
            const r = await api('GET', path, undefined, {signal: signal});
            if (r.ok) title.replaceChildren('Experiment ', el('span', {class: 'mono', text: r.doc.id}),
                                            r.doc.name ? ' — ' + r.doc.name : '');
            return r;
        }, x => path + '/plot.svg?x=' + x, id);
    }

    async function pageCompare(main, q) {
        const ids = (q.get('jobs') || '').split(',').map(s => s.trim()).filter(s => s);
        main.append(el('h1', {}, 'Compare ', el('span', {class: 'muted', text: ids.length + ' jobs'})));
        if (ids.length < 2) {
            main.append(el('p', {class: 'problem', text: 'Select two jobs or more in the jobs table to compare them.'}));
            return;
        }
        const list = ids.map(encodeURIComponent).join(',');
        await comparisonView(main, q, signal => api('GET', '/v1/compare?jobs=' + list, undefined, {signal: signal}),
                             x => '/v1/compare/plot.svg?jobs=' + list + '&x=' + x, 'compare');
    }

    async function pageExperiments(main, q) {
        const asked = Number(q.get('limit'));
        const limit = Number.isInteger(asked) && asked >= 1 && asked <= 500 ? asked : 25;
        let cursors = [null], pageNo = 0, nextCursor = null;
        const tbody = el('tbody');
        const status = el('span', {class: 'muted', id: 'experiments-status'});
        const prev = el('button', {class: 'secondary', id: 'page-prev', type: 'button', text: '‹ Newer'});
        const next = el('button', {class: 'secondary', id: 'page-next', type: 'button', text: 'Older ›'});
        const pageInfo = el('span', {class: 'muted', id: 'page-info'});
        const xid = el('input', {id: 'experiment-id', placeholder: 'x_… experiment id', size: 22});
        main.append(
            el('h1', {text: 'Experiments'}),
            el('div', {class: 'toolbar'}, status, el('span', {class: 'grow'}),
               el('form', {onsubmit: e => {
                   e.preventDefault();
                   if (xid.value.trim()) location.hash = '#/experiments/' + xid.value.trim();
               }}, xid, ' ', el('button', {class: 'secondary', text: 'Open'})),
               el('a', {href: '#/submit'}, el('button', {type: 'button', text: 'New experiment'}))),
            el('table', {id: 'experiments'},
               el('thead', {}, el('tr', {}, ...['Experiment', 'Name', 'Owner'].map(t => el('th', {text: t})),
                  el('th', {class: 'num', text: 'Jobs'}), el('th', {text: 'Created'}))),
               tbody),
            el('div', {class: 'toolbar pager'}, prev, pageInfo, next));
        async function refresh() {
            const c = cursors[pageNo];
            const r = await api('GET', '/v1/experiments?limit=' + limit + (c ? '&cursor=' + encodeURIComponent(c) : ''));
            if (!r.ok) { status.textContent = problemText(r); status.className = 'problem'; return; }
            status.className = 'muted';
            const xs = r.doc.experiments || [];
            nextCursor = r.doc.next_cursor || null;
            status.textContent = xs.length ? 'experiments ' + (pageNo * limit + 1) + '–' + (pageNo * limit + xs.length) +
                (nextCursor ? ', more after these' : '') : '';
            pageInfo.textContent = 'page ' + (pageNo + 1);
            prev.disabled = pageNo === 0;
            next.disabled = !nextCursor;
            tbody.replaceChildren(...xs.map(x => el('tr', {'data-experiment': x.id},
                el('td', {}, el('a', {href: '#/experiments/' + x.id, class: 'mono', text: x.id})),
                el('td', {text: x.name || ''}),
                el('td', {text: x.owner || ''}),
                el('td', {class: 'num jobs', text: fmtValue(x.jobs)}),
                el('td', {class: 'muted', text: fmtTime(x.created_at)}))));
            if (!xs.length)
                tbody.append(el('tr', {}, el('td', {colspan: 5, class: 'muted',
                    text: 'No experiments yet: submit one (a base spec and its variants).'})));
        }
        prev.addEventListener('click', () => { if (pageNo) { pageNo--; cursors.length = pageNo + 1; refresh(); } });
        next.addEventListener('click', () => {
            if (!nextCursor) return;
            cursors[++pageNo] = nextCursor;
            refresh();
        });
        await refresh();
        const timer = setInterval(refresh, 5000);
        onLeave(() => clearInterval(timer));
    }

    function fmtBytes(n) {
        if (typeof n !== 'number') return '–';
        const u = [[1 << 30, 'GiB'], [1 << 20, 'MiB'], [1 << 10, 'KiB']];
        for (const [m, s] of u) if (n >= m) return (n / m).toFixed(1) + ' ' + s;
        return n + ' B';
    }

    /*
     * The upload form: the file streamed as the request's body (POST
     * /v1/datasets?name=...), with the service's 4xx shown as it words it
     * (the line and the rule of a bad file, the limit of a big one).
     */
    function uploadForm(onDone) {
        const file = el('input', {type: 'file', id: 'upload-file', name: 'file', required: true,
                                  'aria-label': 'LibSVM file, plain or gzip'});
        const name = el('input', {id: 'upload-name', name: 'name', placeholder: 'name (default: the file\'s)',
                                  size: 22});
        const replace = el('input', {type: 'checkbox', id: 'upload-replace', name: 'replace'});
        const send = el('button', {type: 'submit', id: 'upload-submit', text: 'Upload'});
        const result = el('span', {class: 'muted', id: 'upload-status'});
        const form = el('form', {class: 'toolbar card', id: 'upload-form'},
            el('b', {text: 'Upload a dataset'}), file, name,
            el('label', {}, replace, ' replace'), send, result);
        const nameOf = f => f.name.replace(/\.gz$/, '').replace(/\.(txt|svm|libsvm)$/, '');
        file.addEventListener('change', () => {
            if (file.files[0]) name.placeholder = nameOf(file.files[0]);
        });
        form.addEventListener('submit', async e => {
            e.preventDefault();
            const f = file.files[0];
            if (!f) { result.textContent = 'choose a file first'; result.className = 'problem'; return; }
            const n = name.value.trim() || nameOf(f);
            send.disabled = true;
            result.className = 'muted';
            result.textContent = 'uploading ' + fmtBytes(f.size) + '…';
            let r, doc = null;
            try {
                r = await fetch('/v1/datasets?name=' + encodeURIComponent(n) + (replace.checked ? '&replace=true' : ''),
                                {method: 'POST', headers: authHeaders({'Content-Type': 'application/octet-stream',
                                                                        Accept: 'application/json'}),
                                 body: f, cache: 'no-store'});
                doc = await r.json().catch(() => null);
            } catch (err) {
                r = {ok: false, status: 0};
                doc = {detail: 'the service cannot be reached (' + err.message + ')'};
            }
            send.disabled = false;
            if (r.ok) {
                result.textContent = 'uploaded ' + ((doc && doc.name) || n) +
                    (doc && typeof doc.rows === 'number' ? ': ' + doc.rows + ' rows, d = ' + doc.d : '');
                onDone();
            } else {
                result.className = 'problem';
                result.textContent = (doc && doc.detail) || 'HTTP ' + r.status;
            }
        });
        return form;
    }

    async function pageDatasets(main) {
        const tbody = el('tbody');
        const status = el('span', {class: 'muted', id: 'datasets-status'});
        main.append(
            el('h1', {text: 'Datasets'}),
            uploadForm(() => refresh()),
            el('div', {class: 'toolbar'}, status),
            el('table', {id: 'datasets'},
               el('thead', {}, el('tr', {}, el('th', {text: 'Name'}),
                  ...['Rows', 'Features (d)', 'Non-zeros', 'Density'].map(t => el('th', {class: 'num', text: t})),
                  el('th', {text: 'Labels (−1, +1)'}), el('th', {class: 'num', text: 'Size'}),
                  el('th', {text: 'SHA-256'}), el('th', {text: 'Uploaded'}), el('th', {}))),
               tbody));
        await refresh();
        async function refresh() {
        const r = await api('GET', '/v1/datasets');
        if (!r.ok) { status.textContent = problemText(r); status.className = 'problem'; return; }
        const ds = r.doc.datasets || [];
        const good = ds.filter(d => !d.error).length;
        status.textContent = good + ' dataset' + (good === 1 ? '' : 's') +
            (ds.length > good ? ', ' + (ds.length - good) + ' file' + (ds.length - good === 1 ? '' : 's') +
             ' the reader refuses' : '');
        tbody.replaceChildren(...ds.map(d => d.error ?
            el('tr', {'data-dataset': d.name, class: 'refused'},
               el('td', {class: 'mono', text: d.name}),
               el('td', {colspan: 5, class: 'problem dataset-error', text: d.error}),
               el('td', {class: 'num', text: fmtBytes(d.bytes)}),
               el('td', {class: 'mono', title: d.sha256 || '', text: (d.sha256 || '').slice(0, 12)}),
               el('td', {}), el('td', {})) :
            el('tr', {'data-dataset': d.name},
               el('td', {class: 'mono', text: d.name}),
               el('td', {class: 'num rows', text: fmtValue(d.rows)}),
               el('td', {class: 'num d', text: fmtValue(d.d)}),
               el('td', {class: 'num', text: fmtValue(d.nnz)}),
               el('td', {class: 'num', text: d.rows && d.d ? (100 * d.nnz / (d.rows * d.d)).toFixed(2) + ' %' : '–'}),
               el('td', {text: (d.labels || []).map(v => (v === null ? '–' : String(v))).join(', ')}),
               el('td', {class: 'num', text: fmtBytes(d.bytes)}),
               el('td', {class: 'mono', title: d.sha256 || '', text: (d.sha256 || '').slice(0, 12)}),
               el('td', {class: 'muted', text: d.uploaded_at ? fmtTime(d.uploaded_at) : 'in the data directory'}),
               el('td', {}, el('a', {href: '#/?dataset=' + encodeURIComponent(d.name), text: 'jobs'}), ' · ',
                  el('a', {href: '#/submit?dataset=' + encodeURIComponent(d.name), text: 'new job'})))));
        if (!ds.length)
            tbody.append(el('tr', {}, el('td', {colspan: 10, class: 'muted',
                text: 'The data directory has no dataset: upload one above, or with `ecopt datasets upload FILE`.'})));
        }
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

    async function pageSubmit(main, q) {
        const vocab = await loadVocabulary();
        /* A job may choose the contractions; the unbiased forms are DIANA's own. */
        const choosable = vocab.compressors.filter(c => c.contraction);
        const takesK = choosable.filter(c => c.takes === 'k').map(c => c.name);
        const field = (label, input, key, wide) =>
            el('label', {class: wide ? 'wide' : ''}, label, input,
               el('small', {class: 'field-error', 'data-field': key}));
        /* The datasets the service can read, as a menu (GET /v1/datasets). */
        const dataset = el('select', {name: 'dataset', id: 'dataset-select', required: true});
        const dsr = await api('GET', '/v1/datasets');
        const dsNames = dsr.ok && dsr.doc && Array.isArray(dsr.doc.datasets) ?
            dsr.doc.datasets.filter(d => !d.error).map(d => d.name) : [];
        const wanted = q.get('dataset') || '';
        if (wanted && dsNames.indexOf(wanted) < 0) dsNames.unshift(wanted);
        dataset.append(...dsNames.map(n => el('option', {value: n, text: n})));
        if (!dsNames.length) dataset.append(el('option', {value: '', text: 'no dataset: upload one'}));
        dataset.value = wanted || (dsNames.indexOf('mushrooms') >= 0 ? 'mushrooms' : dsNames[0] || '');
        const labelsIn = el('input', {name: 'labels', id: 'labels-input', placeholder: 'team=opt, run=3',
                                      size: 24});
        const algorithm = el('select', {name: 'algorithm'},
                             ...namesOf(vocab.algorithms).map(a => el('option', {value: a, text: a})));
        const compressor = el('select', {name: 'compressor'},
                              ...namesOf(choosable).map(c => el('option', {value: c, text: c})));
        if (takesK.length) compressor.value = takesK[0];
        /* Each algorithm's compressor_kind says which of them it may take
           (an unbiased form only, or none at all): the others are shown
           but disabled, and a choice it cannot take moves to one it can. */
        const admits = (kind, c) => kind === 'contraction' || (kind === 'unbiased' && c.unbiased_form) ||
                                    c.name === 'none';
        const fitCompressor = () => {
            const a = vocab.algorithms.find(x => x.name === algorithm.value);
            const kind = a ? a.compressor_kind : 'contraction';
            for (const o of compressor.options) {
                const c = choosable.find(x => x.name === o.value);
                o.disabled = !c || !admits(kind, c);
            }
            if (compressor.selectedOptions[0] && compressor.selectedOptions[0].disabled) {
                const first = [...compressor.options].find(o => !o.disabled);
                if (first) compressor.value = first.value;
            }
        };
        algorithm.addEventListener('change', fitCompressor);
        fitCompressor();
        const k = el('input', {name: 'k', value: '5', inputmode: 'numeric'});
        /* The broadcast compressed by EF21-P (compressor_down) and partial
           participation: offered only where the algorithm's row admits
           them (compressed_broadcast, partial_participation). */
        const downNames = namesOf(vocab.compressors.filter(c => c.broadcast));
        const down = el('select', {name: 'compressor_down'},
                        el('option', {value: 'none', text: 'none (uncompressed)'}),
                        ...downNames.map(c => el('option', {value: c, text: c})));
        const kDown = el('input', {name: 'k_down', placeholder: 'k', inputmode: 'numeric'});
        const participation = el('input', {name: 'participation', placeholder: '1',
                                           inputmode: 'decimal'});
        const fitTraits = () => {
            const a = vocab.algorithms.find(x => x.name === algorithm.value) || {};
            down.disabled = kDown.disabled = !a.compressed_broadcast;
            if (down.disabled) down.value = 'none';
            participation.disabled = !a.partial_participation;
            down.title = down.disabled ? algorithm.value + ' broadcasts its model uncompressed' : '';
            participation.title = participation.disabled ?
                algorithm.value + '\'s theory does not admit partial participation' : '';
        };
        algorithm.addEventListener('change', fitTraits);
        fitTraits();
        const workers = el('input', {name: 'workers', value: '10', inputmode: 'numeric'});
        const lambda = el('input', {name: 'lambda2_rel', placeholder: 'default', inputmode: 'decimal'});
        const rounds = el('input', {name: 'max_rounds', value: '1000', inputmode: 'numeric'});
        const target = el('input', {name: 'target', placeholder: 'default', inputmode: 'decimal'});
        const name = el('input', {name: 'name', placeholder: 'optional'});
        const extra = el('textarea', {name: 'extra', placeholder: '{"batch": 1, "seed": 7}'});
        const errors = el('ul', {class: 'form-errors', id: 'job-errors'});
        const submit = el('button', {type: 'submit', id: 'submit-job', text: 'Submit job'});
        const form = el('form', {class: 'submit card', id: 'job-form', novalidate: true},
            field('Dataset', dataset, 'dataset'),
            field('Algorithm', algorithm, 'algorithm'),
            field('Compressor', compressor, 'compressor'),
            field('k (' + takesK.join(', ') + ')', k, 'compressor.k'),
            field('Broadcast compressor (EF21-P)', down, 'compressor_down'),
            field('Broadcast k', kDown, 'compressor_down.k'),
            field('Participation (fraction of workers a round)', participation, 'participation'),
            field('Workers', workers, 'workers'),
            field('lambda2_rel', lambda, 'lambda2_rel'),
            field('Max rounds', rounds, 'max_rounds'),
            field('Target relative gap', target, 'target'),
            field('Name', name, 'name'),
            field('Labels (KEY=VALUE, comma-separated)', labelsIn, 'labels'),
            field('More spec keys (JSON object)', extra, 'extra', true),
            errors,
            el('div', {class: 'actions'}, submit));
        /* What the user typed goes to the API as typed: numbers as
           numbers, anything else as a string the API will name. */
        const num = s => (s.trim() !== '' && isFinite(Number(s)) ? Number(s) : s.trim());
        form.addEventListener('submit', async e => {
            e.preventDefault();
            const spec = {dataset: dataset.value, algorithm: algorithm.value,
                          compressor: {type: compressor.value}};
            if (k.value.trim() !== '' && takesK.indexOf(compressor.value) >= 0)
                spec.compressor.k = num(k.value);
            if (!down.disabled && down.value !== 'none') {
                spec.compressor_down = {type: down.value};
                if (kDown.value.trim() !== '') spec.compressor_down.k = num(kDown.value);
            }
            if (!participation.disabled && participation.value.trim() !== '')
                spec.participation = num(participation.value);
            for (const [input, key] of [[workers, 'workers'], [lambda, 'lambda2_rel'],
                                        [rounds, 'max_rounds'], [target, 'target']])
                if (input.value.trim() !== '') spec[key] = num(input.value);
            if (name.value.trim()) spec.name = name.value.trim();
            if (labelsIn.value.trim()) {
                spec.labels = {};
                for (const part of labelsIn.value.split(',').map(p => p.trim()).filter(p => p)) {
                    const eq = part.indexOf('=');
                    if (eq <= 0) {
                        showFieldErrors(form, errors, {field: 'labels',
                                                       detail: '"' + part + '" is not KEY=VALUE'});
                        return;
                    }
                    spec.labels[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
                }
            }
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
        const qi = h.indexOf('?');
        const path = qi < 0 ? h : h.slice(0, qi);
        const q = new URLSearchParams(qi < 0 ? '' : h.slice(qi + 1));
        const section = path.startsWith('/experiments') ? 'experiments' : path.startsWith('/datasets') ?
            'datasets' : path.startsWith('/submit') ? 'submit' : path.startsWith('/compare') ? 'compare' : 'jobs';
        document.querySelectorAll('nav a').forEach(a =>
            a.classList.toggle('active', a.id === 'nav-' + section));
        let m;
        try {
            if ((m = path.match(/^\/jobs\/([A-Za-z0-9_.-]+)$/))) await pageJob(main, m[1], q);
            else if ((m = path.match(/^\/experiments\/([A-Za-z0-9_.-]+)$/))) await pageExperiment(main, m[1], q);
            else if (path === '/experiments') await pageExperiments(main, q);
            else if (path === '/compare') await pageCompare(main, q);
            else if (path === '/datasets') await pageDatasets(main, q);
            else if (path === '/submit') await pageSubmit(main, q);
            else await pageJobs(main, q);
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
