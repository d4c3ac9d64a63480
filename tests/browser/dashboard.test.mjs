// The dashboard in a real browser against the real server: `ecopt serve`
// on a free port with a temporary database and authentication on, headless
// Chromium driven by playwright-core. A user enters the token, sees the
// API's 422 messages in the submit form, submits a job, watches its chart
// (and its counters) grow from the event stream until it succeeds, plots
// other columns against other axes with hover values, downloads every row
// as CSV and the plots as SVG, filters, sorts and pages the jobs table,
// compares selected jobs and an experiment's, and reads the experiments and
// datasets pages.
//
// Screenshots go to build/screenshots/ (outside the tracked tree), or to
// docs/screenshots/ with ECOPT_REFRESH_SCREENSHOTS=1 (the ones
// docs/dashboard.md shows), or to ECOPT_SCREENSHOTS.
//
// Environment: ECOPT_BIN (default build/ecopt), ECOPT_DATA_DIR (default
// ../shared/datasets), ECOPT_CHROMIUM (default /usr/bin/chromium).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, mkdirSync, rmSync, existsSync, readFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const bin = process.env.ECOPT_BIN || join(root, 'build', 'ecopt');
const dataDir = process.env.ECOPT_DATA_DIR || resolve(root, '..', 'shared', 'datasets');
const chromiumPath = process.env.ECOPT_CHROMIUM || '/usr/bin/chromium';
const shots = resolve(root, process.env.ECOPT_SCREENSHOTS ||
                            (process.env.ECOPT_REFRESH_SCREENSHOTS === '1' ? join('docs', 'screenshots') :
                             join('build', 'screenshots')));
const TOKEN = 'alice-browser-secret-0123456789';

const tmp = mkdtempSync(join(tmpdir(), 'ecopt-browser-'));
let server = null, browser = null, passed = 0, failed = 0, serverLog = '';
const problems = [];

function fail(msg) {
    throw new Error(msg);
}

// Starts ecopt serve on port 0 with auth on; resolves to its base URL.
// Its data directory is a copy of the datasets the test uses, so that an
// upload lands there and not in the shared one.
const ownData = join(tmp, 'data');
function startServer() {
    writeFileSync(join(tmp, 'tokens'), `alice:${TOKEN}\nroot:root-browser-secret-0123456789:admin\n`);
    mkdirSync(ownData);
    for (const name of ['mushrooms', 'heart_scale', 'a1a']) copyFileSync(join(dataDir, name), join(ownData, name));
    server = spawn(bin, ['serve', '--listen', '127.0.0.1:0', '--db', join(tmp, 'ecopt.db'),
                         '--tokens-file', join(tmp, 'tokens'), '--data-dir', ownData, '--quiet'],
                   {stdio: ['ignore', 'pipe', 'pipe']});
    server.stderr.on('data', d => { serverLog += d; });
    return new Promise((ok, bad) => {
        const timer = setTimeout(() => bad(new Error('ecopt serve did not start in 20 s: ' + serverLog)), 20000);
        server.on('exit', code => bad(new Error(`ecopt serve exited (${code}): ${serverLog}`)));
        createInterface({input: server.stdout}).once('line', line => {
            clearTimeout(timer);
            const m = line.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
            m ? ok(m[1]) : bad(new Error('ecopt serve said: ' + line));
        });
    });
}

async function check(name, fn) {
    const t0 = Date.now();
    try {
        await fn();
        passed++;
        console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    } catch (e) {
        failed++;
        console.log(`FAIL ${name}: ${e.message}`);
        if (problems.length) console.log('     and in the page: ' + problems.join('; '));
        throw e;
    }
}

async function main() {
    for (const [what, path] of [['ecopt', bin], ['chromium', chromiumPath],
                                ['the datasets', join(dataDir, 'mushrooms')]])
        if (!existsSync(path)) fail(`${what} not found at ${path}`);
    mkdirSync(shots, {recursive: true});
    const base = await startServer();
    console.log(`server at ${base}, chromium ${chromiumPath}`);
    browser = await chromium.launch({executablePath: chromiumPath, headless: true,
                                     args: ['--no-sandbox']});
    const context = await browser.newContext({viewport: {width: 1280, height: 900}});
    const page = await context.newPage();
    const urls = [];
    page.on('pageerror', e => problems.push('page error: ' + e.message));
    page.on('console', m => {
        // Chromium logs every 4xx; the 401 before the token is entered,
        // the 422s of the form and upload tests and the 400 of the bad
        // filter are expected, nothing else is.
        if (m.type() === 'error' &&
            !/Failed to load resource: .* status of (401|422) /.test(m.text()) &&
            !(/status of 400 /.test(m.text()) && /[?&]k=five$/.test(m.location().url || '')))
            problems.push('console: ' + m.text() + ' at ' + (m.location().url || '?'));
    });
    page.on('request', r => urls.push(r.url()));

    await check('the page asks for a token when the API needs one', async () => {
        const r = await page.goto(base + '/');
        if (r.status() !== 200) fail('GET / answered ' + r.status());
        const csp = r.headers()['content-security-policy'] || '';
        if (!csp.includes("script-src 'self'")) fail('no Content-Security-Policy: ' + csp);
        await page.locator('#notice').filter({hasText: 'needs a token'}).waitFor({timeout: 10000});
    });

    await check('the token is entered once and kept in the session', async () => {
        await page.fill('#token-input', TOKEN);
        await page.click('#token-save');
        await page.locator('#token-state', {hasText: 'token set'}).waitFor();
        await page.locator('#jobs tbody', {hasText: 'No jobs yet'}).waitFor({timeout: 10000});
        const kept = await page.evaluate(() => sessionStorage.getItem('ecopt.token'));
        if (kept !== TOKEN) fail('sessionStorage holds ' + kept);
    });

    await check('the submit form shows the API\'s 422 messages', async () => {
        await page.click('#nav-submit');
        await page.locator('#job-form').waitFor();
        await page.selectOption('select[name=dataset]', 'mushrooms');
        await page.selectOption('select[name=algorithm]', 'eclk');
        await page.selectOption('select[name=compressor]', 'topk');
        await page.fill('input[name=workers]', '0');
        await page.click('#submit-job');
        await page.locator('#job-errors li[data-field=workers]').waitFor({timeout: 10000});
        await page.locator('label.invalid input[name=workers]').waitFor();
        await page.fill('input[name=workers]', '10');
        await page.fill('input[name=k]', '500');
        await page.click('#submit-job');
        const want = 'compressor.k: must be in 1..112 (the dimension d of mushrooms; got 500)';
        await page.locator('#job-errors li', {hasText: want}).waitFor({timeout: 10000});
        const slot = await page.locator('small[data-field="compressor.k"]').textContent();
        if (!slot.includes('must be in 1..112')) fail('the k field says: ' + slot);
        await page.screenshot({path: join(shots, 'submit-422.png')});
    });

    // The API as a script sees it, with the token.
    const call = async (method, path, body) => {
        const r = await fetch(base + path, {method, headers: {Authorization: 'Bearer ' + TOKEN,
                                                               'Content-Type': 'application/json'},
                                            body: body === undefined ? undefined : JSON.stringify(body)});
        const text = await r.text();
        let doc = null;
        try { doc = JSON.parse(text); } catch (e) { doc = text; }
        return {status: r.status, doc, headers: r.headers};
    };
    const FINAL = ['succeeded', 'failed', 'cancelled', 'interrupted'];
    const waitJobs = async ids => {
        const t0 = Date.now();
        for (;;) {
            const states = await Promise.all(ids.map(async id => (await call('GET', '/v1/jobs/' + id)).doc.state));
            if (states.every(s => FINAL.includes(s))) return states;
            if (Date.now() - t0 > 120000) fail('jobs did not end in 120 s: ' + states.join(' '));
            await new Promise(ok => setTimeout(ok, 200));
        }
    };
    const download = async selector => {
        const [dl] = await Promise.all([page.waitForEvent('download', {timeout: 30000}), page.click(selector)]);
        return {name: dl.suggestedFilename(), text: readFileSync(await dl.path(), 'utf8')};
    };
    const tableIds = () => page.evaluate(() =>
        [...document.querySelectorAll('#jobs tbody tr[data-job]')].map(r => r.dataset.job));
    // Waits until pred(arg) holds in the page: the jobs table refreshes itself.
    const tableSettles = async (pred, what, arg) => {
        try {
            await page.waitForFunction(pred, arg === undefined ? null : arg, {timeout: 10000, polling: 100});
        } catch (e) {
            fail(what + ': the table shows ' + JSON.stringify(await tableIds()));
        }
    };

    let jobId = null;
    await check('a job submitted through the form runs, its chart and its counters grow live, it succeeds', async () => {
        await page.fill('input[name=k]', '5');
        await page.fill('input[name=max_rounds]', '5000');
        await page.fill('input[name=name]', 'browser test');
        await page.fill('#labels-input', 'team=green, run=1');
        await page.click('#submit-job');
        await page.waitForURL(/#\/jobs\/j_[0-9a-f]{16}$/, {timeout: 10000});
        jobId = page.url().split('/').pop();
        // Sample the state, the points drawn and the counters until the job ends.
        const samples = [];
        const t0 = Date.now();
        for (;;) {
            const s = await page.evaluate(() => ({
                state: (document.querySelector('#job-state [data-state]') || {}).textContent,
                points: Number((document.getElementById('chart') || {getAttribute: () => 0})
                               .getAttribute('data-points') || 0),
                round: (document.getElementById('fact-round') || {}).textContent,
                bits: (document.getElementById('fact-bits') || {}).textContent,
            }));
            samples.push(s);
            if (FINAL.includes(s.state)) break;
            if (Date.now() - t0 > 120000) fail('the job did not end in 120 s: ' + JSON.stringify(s));
            await page.waitForTimeout(100);
        }
        const last = samples[samples.length - 1];
        if (last.state !== 'succeeded') fail('the job ended ' + last.state);
        const running = samples.filter(s => s.state === 'running' && s.points > 0);
        if (!running.length) fail('never saw the chart while the job ran: ' + JSON.stringify(samples.slice(0, 5)));
        const first = running[0].points;
        if (!(last.points > first))
            fail(`the chart did not grow from the stream: ${first} points while running, ${last.points} at the end`);
        // The bits counter moves with the chart: as many values as the round counter.
        const distinct = k => new Set(running.map(s => s[k])).size;
        if (distinct('round') > 1 && distinct('bits') < distinct('round'))
            fail(`the bits counter took ${distinct('bits')} values while the round took ${distinct('round')}`);
        console.log(`     ${samples.length} samples; ${first} points drawn when first seen running, ` +
                    `${last.points} at the end; ${distinct('round')} rounds and ${distinct('bits')} bit counts seen`);
        // Every row with a positive gap is drawn (501 rows for 5000 rounds).
        const rows = (await call('GET', `/v1/jobs/${jobId}/metrics?limit=10000`)).doc.rows;
        const drawn = Number(await page.locator('#chart').getAttribute('data-points'));
        if (drawn !== rows.filter(m => m.rel_gap > 0).length)
            fail(`the chart draws ${drawn} points for ${rows.length} rows`);
        const d = await page.locator('#chart path.curve').getAttribute('d');
        if ((d.match(/L/g) || []).length < 10) fail('the curve has too few segments: ' + d.slice(0, 80));
        await page.locator('#fact-round', {hasText: '5000'}).waitFor();
        const bitsText = (await page.locator('#fact-bits').textContent()).trim();
        const want = rows[rows.length - 1].bits_up;
        const [num, unit] = bitsText.split(' ');
        const scale = {k: 1e3, M: 1e6, G: 1e9, T: 1e12}[unit] || 1;
        if (Math.abs(Number(num) * scale - want) > 0.01 * want)
            fail(`the bits counter says ${bitsText}, the last row ${want}`);
        const params = await page.locator('#params').textContent();
        if (!params.includes('theta1') || !params.includes('step')) fail('no resolved parameters: ' + params);
        await page.screenshot({path: join(shots, 'job.png'), fullPage: true});
    });

    await check('the chart plots the chosen column against the chosen axis, log or linear, with hover values', async () => {
        const rows = (await call('GET', `/v1/jobs/${jobId}/metrics?limit=10000`)).doc.rows;
        await page.selectOption('#y-column', 'grad_norm');
        await page.locator('#chart[data-y=grad_norm]').waitFor();
        if (!(await page.locator('#chart .ylabel').textContent()).includes('gradient norm'))
            fail('the y label is ' + await page.locator('#chart .ylabel').textContent());
        let drawn = Number(await page.locator('#chart').getAttribute('data-points'));
        if (drawn !== rows.filter(m => m.grad_norm > 0).length) fail(`grad_norm: ${drawn} points for ${rows.length} rows`);
        await page.selectOption('#x-axis', 'bits');
        await page.locator('#chart[data-x=bits_up]').waitFor();
        if ((await page.locator('#chart .xlabel').textContent()) !== 'bits sent up per worker')
            fail('the x label is ' + await page.locator('#chart .xlabel').textContent());
        // A log axis has decade ticks (10 with an exponent), a linear one numbers.
        if (!(await page.locator('#chart .ytick tspan').count())) fail('no decade ticks on the log scale');
        await page.selectOption('#y-scale', 'linear');
        await page.locator('#chart[data-scale=linear]').waitFor();
        if (await page.locator('#chart .ytick tspan').count()) fail('decade ticks on the linear scale');
        const ticks = await page.locator('#chart .ytick').allTextContents();
        if (ticks.length < 3 || ticks.some(t => !isFinite(Number(t)))) fail('linear y ticks: ' + ticks.join(' '));
        // The choice is in the address, so a reload keeps it.
        if (!/x=bits/.test(page.url()) || !/y=grad_norm/.test(page.url()) || !/scale=linear/.test(page.url()))
            fail('the address does not keep the choice: ' + page.url());
        // Hover: the row nearest the pointer, with its exact value.
        const box = await page.locator('#chart').boundingBox();
        await page.mouse.move(box.x + box.width * 0.4, box.y + box.height * 0.5);
        const hover = page.locator('#chart g.hover');
        await hover.waitFor({timeout: 5000});
        const round = Number(await hover.getAttribute('data-round'));
        const value = Number(await hover.getAttribute('data-value'));
        const row = rows.find(m => m.round === round);
        if (!row) fail('the hover names round ' + round + ', which has no row');
        if (row.grad_norm !== value) fail(`hover at round ${round}: ${value}, the row has ${row.grad_norm}`);
        const text = await hover.textContent();
        if (!text.includes('round ' + round) || !text.includes('grad_norm = ')) fail('the hover says ' + text);
        if (round <= 0 || round >= 5000) fail('the hover at 40% of the width is at round ' + round);
        await page.screenshot({path: join(shots, 'job-chart.png')});
        await page.mouse.move(5, 5);
        await page.locator('#chart g.hover').waitFor({state: 'detached', timeout: 5000});
        // Back to the defaults for the next cases.
        await page.selectOption('#y-column', 'rel_gap');
        await page.selectOption('#x-axis', 'rounds');
        await page.selectOption('#y-scale', 'log');
    });

    await check('the job page shows its labels, log, CPU and memory, and the target on the chart', async () => {
        const chips = await page.locator('#job-labels .chip').allTextContents();
        if (JSON.stringify(chips.sort()) !== JSON.stringify(['run=1', 'team=green']))
            fail('the labels shown: ' + chips.join(' '));
        await page.waitForFunction(() => {
            const l = document.getElementById('job-log');
            return l && l.textContent.length > 20 && !/^loading|no log yet/.test(l.textContent);
        }, null, {timeout: 10000});
        const log = await page.locator('#job-log').textContent();
        const served = (await call('GET', `/v1/jobs/${jobId}/log`)).doc;
        if (typeof served !== 'string' || !log.includes(served.trim().split('\n').pop()))
            fail('the log shown is not the job\'s: ' + log.slice(-120));
        const u = (await call('GET', '/v1/jobs/' + jobId)).doc.usage;
        await page.locator('#fact-cpu', {hasText: u.cpu_seconds.toFixed(2)}).waitFor({timeout: 10000});
        if (!/ (B|KiB|MiB|GiB) \/ /.test(await page.locator('#fact-mem').textContent()))
            fail('memory: ' + await page.locator('#fact-mem').textContent());
        await page.locator('#chart line.target').waitFor({state: 'attached', timeout: 5000});
        if ((await page.locator('#chart').getAttribute('data-target')) !== '1e-9')
            fail('the target line is at ' + await page.locator('#chart').getAttribute('data-target'));
        if (!(await page.locator('#retry').isVisible())) fail('no retry button on an ended job');
        await page.screenshot({path: join(shots, 'job-log.png'), fullPage: true});
    });

    await check('retry on the job page submits the job again and opens the new one', async () => {
        const r = await call('POST', '/v1/jobs', {dataset: 'heart_scale', workers: 2, backend: 'inproc',
                                                  max_rounds: 5000000, target: 0, eval_every: 1000000,
                                                  name: 'to retry'});
        if (r.status !== 201) fail('submit: ' + r.status + ' ' + JSON.stringify(r.doc));
        await call('POST', `/v1/jobs/${r.doc.id}/cancel`, {});
        await waitJobs([r.doc.id]);
        await page.goto(base + '/#/jobs/' + r.doc.id);
        await page.locator('#job-state [data-state=cancelled]').waitFor({timeout: 10000});
        if (await page.locator('#cancel').isVisible()) fail('cancel offered on an ended job');
        await page.click('#retry');
        await page.waitForURL(u => /#\/jobs\/j_[0-9a-f]{16}$/.test(u.href) && !u.href.endsWith(r.doc.id), {timeout: 10000});
        const again = page.url().split('/').pop();
        const doc = (await call('GET', '/v1/jobs/' + again)).doc;
        if (doc.name !== 'to retry') fail('the retried job is named ' + doc.name);
        await page.locator('#job-state [data-state]').waitFor();
        // Where the service says which job a retry came from, the page links it.
        if (doc.retry_of !== undefined &&
            (await page.locator('#fact-retry-of').textContent({timeout: 10000})) !== r.doc.id)
            fail('the retried job does not link its origin');
        await call('POST', `/v1/jobs/${again}/cancel`, {});
        await waitJobs([again]);
    });

    await check('the downloads: CSV with every row, the service\'s plot and the chart as SVG', async () => {
        // 12001 rows: more than the API's default page (1000) and the old download's 10000.
        const r = await call('POST', '/v1/jobs', {dataset: 'heart_scale', algorithm: 'ec-sgd', workers: 2,
                                                  compressor: {type: 'topk', k: 2}, max_rounds: 12000,
                                                  eval_every: 1, target: 1e-30});
        if (r.status !== 201) fail('submit: ' + r.status + ' ' + JSON.stringify(r.doc));
        const id = r.doc.id;
        await waitJobs([id]);
        await page.goto(base + '/#/jobs/' + id);
        await page.locator('#job-state [data-state=succeeded]').waitFor({timeout: 10000});
        // An unnamed job: no "null" anywhere on its page.
        const body = await page.locator('main').innerText();
        if (/\bnull\b/.test(body)) fail('the page of an unnamed job says null: ' +
                                        body.slice(Math.max(0, body.indexOf('null') - 60), body.indexOf('null') + 20));
        const csv = await download('#download-csv');
        const lines = csv.text.trimEnd().split('\n');
        if (!lines[0].startsWith('round,bits_up,')) fail('CSV header: ' + lines[0]);
        if (lines.length !== 12002) fail(`the CSV has ${lines.length - 1} rows, the job 12001`);
        if (!lines[12001].startsWith('12000,')) fail('the last CSV row: ' + lines[12001]);
        if (csv.name !== id + '.csv') fail('CSV file name ' + csv.name);
        const plot = await download('#download-svg');
        if (!plot.text.includes('<svg') || (plot.text.match(/<g class="series"/g) || []).length !== 1)
            fail('the plot download is not the job\'s plot: ' + plot.text.slice(0, 120));
        const chart = await download('#chart-svg');
        if (!chart.text.startsWith('<?xml') || !chart.text.includes('xmlns="http://www.w3.org/2000/svg"') ||
            !chart.text.includes('class="curve"') || chart.text.includes('class="hover"'))
            fail('the chart download: ' + chart.text.slice(0, 200));
        console.log(`     CSV ${lines.length - 1} rows, plot ${plot.text.length} bytes, chart ${chart.text.length} bytes`);
    });

    await check('the jobs table shows the final state and gap', async () => {
        await page.click('#nav-jobs');
        const row = page.locator(`#jobs tr[data-job="${jobId}"]`);
        await row.waitFor({timeout: 10000});
        if ((await row.getAttribute('data-state')) !== 'succeeded') fail('row state ' + (await row.getAttribute('data-state')));
        await row.locator('.badge', {hasText: 'succeeded'}).waitFor();
        const gap = (await row.locator('td.gap').textContent()).trim();
        if (!/^\d\.\d\de[-+]\d+$/.test(gap)) fail('gap cell: ' + gap);
        const text = await row.textContent();
        for (const want of ['eclk', 'topk k=5', 'mushrooms', 'browser test'])
            if (!text.includes(want)) fail(`row lacks ${want}: ${text}`);
    });

    let experimentId = null;
    await check('an experiment compares its jobs: the table and the overlaid curves', async () => {
        await page.click('#nav-submit');
        const spec = {name: 'eclk vs ec-gd vs ef21',
                      base: {dataset: 'mushrooms', workers: 10, lambda2_rel: 1e-3, max_rounds: 1500,
                             target: 1e-6, compressor: {type: 'topk', k: 5}},
                      variants: [{algorithm: 'eclk'}, {algorithm: 'ec-gd'}, {algorithm: 'ef21'}]};
        await page.fill('#experiment-spec', JSON.stringify(spec, null, 2));
        await page.click('#experiment-form button[type=submit]');
        await page.waitForURL(/#\/experiments\/x_[0-9a-f]{16}$/, {timeout: 10000});
        experimentId = page.url().split('/').pop();
        await page.waitForFunction(() => {
            const rows = [...document.querySelectorAll('#comparison tbody tr')];
            return rows.length === 3 && rows.every(r => {
                const s = r.querySelector('[data-state]');
                return s && ['succeeded', 'failed', 'cancelled'].includes(s.dataset.state);
            });
        }, null, {timeout: 120000});
        const x = (await call('GET', '/v1/experiments/' + experimentId)).doc;
        // The curves are drawn after the last refresh: one per job, all of their rows.
        await page.waitForFunction(n => {
            const c = document.getElementById('compare-chart');
            return c && c.getAttribute('data-series') === '3' && Number(c.getAttribute('data-points')) >= n;
        }, 3, {timeout: 10000});
        const paths = await page.locator('#compare-chart path.curve').evaluateAll(ps => ps.map(p => p.getAttribute('d')));
        if (paths.length !== 3 || paths.some(d => (d.match(/L/g) || []).length < 5))
            fail('the experiment\'s curves: ' + paths.map(d => d.slice(0, 40)).join(' | '));
        const eclk = x.comparison.find(c => c.algorithm === 'eclk');
        const row = page.locator(`#comparison tr[data-job="${eclk.job}"]`);
        const cells = await row.locator('td.num').allTextContents();
        if (eclk.reached && cells[0] !== String(eclk.rounds_to_target))
            fail(`rounds to target ${cells[0]}, the API ${eclk.rounds_to_target}`);
        const plot = await download('#download-svg');
        if ((plot.text.match(/<g class="series"/g) || []).length !== 3) fail('the experiment plot download lacks curves');
        await page.waitForTimeout(300);
        await page.screenshot({path: join(shots, 'experiment.png'), fullPage: true});
    });

    await check('the experiments page lists the experiment with its jobs', async () => {
        await page.click('#nav-experiments');
        const row = page.locator(`#experiments tr[data-experiment="${experimentId}"]`);
        await row.waitFor({timeout: 10000});
        if ((await row.locator('td.jobs').textContent()) !== '3') fail('jobs: ' + await row.locator('td.jobs').textContent());
        if (!(await row.textContent()).includes('eclk vs ec-gd vs ef21')) fail('row: ' + await row.textContent());
        await page.screenshot({path: join(shots, 'experiments.png')});
        await row.locator('a').click();
        await page.waitForURL(new RegExp('#/experiments/' + experimentId + '$'));
        await page.locator('#comparison tbody tr').nth(2).waitFor({timeout: 10000});
    });

    // Jobs of several algorithms, datasets, labels, names and stop reasons for the table.
    const seeded = [];
    await check('the jobs table filters by state, stop reason, algorithm, dataset, label and name', async () => {
        const algos = ['eclk', 'ec-gd', 'ef21'];
        for (let i = 0; i < 9; i++) {
            const r = await call('POST', '/v1/jobs', {dataset: i % 3 === 2 ? 'a1a' : 'heart_scale',
                                                      algorithm: algos[i % 3], workers: 2, max_rounds: 60 + 10 * i,
                                                      compressor: {type: 'topk', k: 3},
                                                      // even seeds reach a loose target whatever the
                                                      // defaults, odd ones run to their budget
                                                      target: i % 2 ? 1e-12 : 0.5,
                                                      name: 'seed ' + i + (i % 2 ? ' odd' : ' even'),
                                                      labels: {team: i < 4 ? 'red' : 'blue'}});
            if (r.status !== 201) fail('seed submit: ' + r.status + ' ' + JSON.stringify(r.doc));
            seeded.push(r.doc);
        }
        await waitJobs(seeded.map(j => j.id));
        const all = (await call('GET', '/v1/jobs?limit=500')).doc.jobs;
        const expect = async (what, pred) => {
            const want = all.filter(pred).map(j => j.id);
            await tableSettles(w => {
                const got = [...document.querySelectorAll('#jobs tbody tr[data-job]')].map(r => r.dataset.job);
                return got.length === w.length && w.every(id => got.includes(id));
            }, what, want);
        };
        await page.click('#nav-jobs');
        await page.locator('#jobs tbody tr[data-job]').first().waitFor();
        await page.selectOption('#algorithm-filter', 'ef21');
        await expect('algorithm ef21', j => j.algorithm === 'ef21');
        if (!urls.some(u => /\/v1\/jobs\?.*algorithm=ef21/.test(u))) fail('no request with algorithm=ef21');
        await page.selectOption('#algorithm-filter', '');
        await page.selectOption('#dataset-filter', 'a1a');
        await expect('dataset a1a', j => j.dataset === 'a1a');
        await page.selectOption('#dataset-filter', '');
        await page.fill('#label-filter', 'team=red');
        await page.press('#label-filter', 'Enter');
        await expect('label team=red', j => j.labels && j.labels.team === 'red');
        await page.fill('#name-filter', 'ODD');
        await page.press('#name-filter', 'Enter');
        await expect('label team=red and a name like odd', j => j.labels && j.labels.team === 'red' &&
                     /odd/.test(j.name));
        if (!/label=team%3Dred|label=team=red/.test(page.url()) || !/name=ODD/.test(page.url()))
            fail('the address does not keep the filters: ' + page.url());
        await page.screenshot({path: join(shots, 'jobs-filtered.png')});
        await page.click('#clear-filters');
        await page.selectOption('#state-filter', 'succeeded');
        await expect('state succeeded', j => j.state === 'succeeded');
        await page.selectOption('#state-filter', '');
        await page.selectOption('#stop-filter', 'target_reached');
        await expect('stop reason target_reached', j => j.stop_reason === 'target_reached');
        if (!(await page.locator('#jobs tbody .stop-reason[data-stop=target_reached]').count()))
            fail('no row shows its stop reason');
        await page.click('#clear-filters');
        await expect('no filter', () => true);
        // The labels column: each job's labels, linking to the filter.
        const red = page.locator(`#jobs tr[data-job="${seeded[0].id}"] td.labels .chip[data-label=team]`);
        if ((await red.textContent()) !== 'team=red') fail('labels cell: ' + await red.textContent());
        // Filters on parameters and results, as the API takes them.
        await page.fill('#param-filter', 'k=3 reached=true');
        await page.press('#param-filter', 'Enter');
        await expect('k=3 reached=true', j => j.spec.compressor.k === 3 && j.stop_reason === 'target_reached');
        if (!urls.some(u => /\/v1\/jobs\?.*k=3&reached=true/.test(u))) fail('no request with k=3&reached=true');
        await page.fill('#param-filter', 'max_rounds_ge=100 workers=2');
        await page.press('#param-filter', 'Enter');
        await expect('max_rounds_ge=100 workers=2', j => j.spec.max_rounds >= 100 && j.workers === 2);
        await page.fill('#param-filter', 'k=five');
        await page.press('#param-filter', 'Enter');
        await page.locator('#jobs-status.problem', {hasText: 'k must be a finite decimal number'})
            .waitFor({timeout: 10000});
        await page.fill('#param-filter', '');
        await page.press('#param-filter', 'Enter');
        await expect('no filter', () => true);
        // The columns shown are the user's choice, kept in the address.
        await page.click('#columns summary');
        await page.check('#columns input[data-col=step_multiplier]');
        await page.check('#columns input[data-col=k]');
        await page.uncheck('#columns input[data-col=workers]');
        await page.locator('#jobs th[data-sort=step_multiplier]').waitFor();
        if (await page.locator('#jobs th[data-sort=workers]').count()) fail('workers still shown');
        if (!/cols=state,algorithm,compressor,dataset,step_multiplier,k,round,gap,name,labels/.test(page.url()))
            fail('the address does not keep the columns: ' + page.url());
        const k = await page.locator(`#jobs tr[data-job="${seeded[0].id}"] td`).nth(6).textContent();
        if (k !== '1') fail('the step multiplier cell says ' + k);
        await page.screenshot({path: join(shots, 'jobs-columns.png')});
        await page.uncheck('#columns input[data-col=step_multiplier]');
        await page.uncheck('#columns input[data-col=k]');
        await page.check('#columns input[data-col=workers]');
        await page.click('#columns summary');
        await page.locator('#jobs th[data-sort=workers]').waitFor();
    });

    await check('the jobs table sorts by a column, both ways', async () => {
        const gaps = () => page.evaluate(() =>
            [...document.querySelectorAll('#jobs tbody tr[data-job] td.gap')].map(td => Number(td.textContent)));
        await page.click('#jobs th[data-sort=gap]');
        await page.locator('#jobs th[data-sort=gap][aria-sort=ascending]').waitFor();
        await page.waitForFunction(() => /sorted by gap/.test(document.getElementById('jobs-status').textContent));
        // A job without a gap ('–') comes last either way.
        const inOrder = (g, up) => g.every((v, i) => !i || isNaN(v) || (isNaN(g[i - 1]) ? false : up ? v >= g[i - 1] : v <= g[i - 1]));
        let g = await gaps();
        if (g.length < 10 || !inOrder(g, true)) fail('not ascending: ' + g.join(' '));
        await page.click('#jobs th[data-sort=gap]');
        await page.locator('#jobs th[data-sort=gap][aria-sort=descending]').waitFor();
        await page.waitForFunction(() => {
            const v = [...document.querySelectorAll('#jobs tbody tr[data-job] td.gap')].map(td => Number(td.textContent));
            return v.length > 1 && v[0] >= v[1];
        });
        g = await gaps();
        if (!inOrder(g, false)) fail('not descending: ' + g.join(' '));
        await page.click('#jobs th[data-sort=dataset]');
        await page.locator('#jobs th[data-sort=dataset][aria-sort=ascending]').waitFor();
        await page.waitForFunction(() => /sorted by dataset/.test(document.getElementById('jobs-status').textContent));
        const ds = await page.evaluate(() =>
            [...document.querySelectorAll('#jobs tbody tr[data-job] td:nth-child(6)')].map(td => td.textContent));
        if (ds.some((v, i) => i && v < ds[i - 1])) fail('datasets not in order: ' + ds.join(' '));
        await page.screenshot({path: join(shots, 'jobs.png')});
        // Back to the service's order, newest first.
        await page.click('#jobs th[data-sort=created]');
        await page.locator('#jobs th[data-sort=created][aria-sort=descending]').waitFor();
    });

    await check('the jobs table pages through next_cursor', async () => {
        const all = (await call('GET', '/v1/jobs?limit=500')).doc.jobs.map(j => j.id);
        if (all.length <= 10) fail('only ' + all.length + ' jobs');
        await page.selectOption('#page-size', '10');
        await tableSettles(w => {
            const got = [...document.querySelectorAll('#jobs tbody tr[data-job]')].map(r => r.dataset.job);
            return got.length === 10 && got.every((id, i) => id === w[i]);
        }, 'the first page of 10', all.slice(0, 10));
        const before = urls.length;
        await page.click('#page-next');
        await tableSettles(w => {
            const got = [...document.querySelectorAll('#jobs tbody tr[data-job]')].map(r => r.dataset.job);
            return got.length === w.length && got.every((id, i) => id === w[i]);
        }, 'the second page', all.slice(10, 20));
        if (!urls.slice(before).some(u => /\/v1\/jobs\?limit=10&cursor=/.test(u))) fail('no request with the cursor');
        if (!(await page.locator('#page-info').textContent()).includes('page 2')) fail('not on page 2');
        // Select jobs on two pages; the selection survives paging.
        const pick = async id => page.locator(`#jobs input.pick[data-job="${id}"]`).check();
        // The first job, the experiment's eclk (both here) and its ef21 (on the first page).
        const xjobs = (await call('GET', '/v1/experiments/' + experimentId)).doc.comparison;
        const byAlgo = a => xjobs.find(c => c.algorithm === a).job;
        const second = await tableIds();
        for (const id of [jobId, byAlgo('eclk')]) {
            if (!second.includes(id)) fail(id + ' is not on the second page: ' + second.join(' '));
            await pick(id);
        }
        await page.click('#page-prev');
        await tableSettles(w => {
            const got = [...document.querySelectorAll('#jobs tbody tr[data-job]')].map(r => r.dataset.job);
            return got.length === 10 && got.every((id, i) => id === w[i]);
        }, 'back to the first page', all.slice(0, 10));
        const first = new Set(await tableIds());
        if (!first.has(byAlgo('ef21'))) fail('the experiment\'s ef21 is not on the first page');
        await pick(byAlgo('ef21'));
        const sel = await page.evaluate(() => JSON.parse(sessionStorage.getItem('ecopt.selected')));
        if (sel.length !== 3) fail('selected: ' + JSON.stringify(sel));
        await page.locator('#selection', {hasText: '3 selected'}).waitFor();
        await page.selectOption('#page-size', '50');
    });

    await check('the selected jobs are compared: the table and the overlaid curves, with hover', async () => {
        const sel = await page.evaluate(() => JSON.parse(sessionStorage.getItem('ecopt.selected')));
        await page.click('#compare-selected');
        await page.waitForURL(/#\/compare\?jobs=/);
        if (!page.url().includes('jobs=' + sel.join(','))) fail('compare address ' + page.url());
        await page.locator('#comparison tbody tr').nth(2).waitFor({timeout: 10000});
        const cmp = (await call('GET', '/v1/compare?jobs=' + sel.join(','))).doc;
        if (cmp.comparison.length !== 3) fail('the API compares ' + cmp.comparison.length);
        await page.waitForFunction(() => {
            const c = document.getElementById('compare-chart');
            return c && c.getAttribute('data-series') === '3' &&
                [...c.querySelectorAll('path.curve')].every(p => (p.getAttribute('d').match(/L/g) || []).length >= 3);
        }, null, {timeout: 10000});
        for (const c of cmp.comparison) {
            const row = page.locator(`#comparison tr[data-job="${c.job}"]`);
            const cells = await row.locator('td.num').allTextContents();
            if (cells[0] !== (c.rounds_to_target === null ? '–' : String(c.rounds_to_target)))
                fail(`${c.job}: rounds to target ${cells[0]}, the API ${c.rounds_to_target}`);
            if ((await row.locator('td.reached').textContent()) !== (c.reached ? 'yes' : 'no')) fail('reached');
        }
        await page.selectOption('#x-axis', 'seconds');
        await page.locator('#compare-chart[data-x=seconds]').waitFor();
        await page.selectOption('#x-axis', 'rounds');
        await page.locator('#compare-chart[data-x=round]').waitFor();
        const plot = await download('#download-svg');
        if ((plot.text.match(/<g class="series"/g) || []).length !== 3)
            fail('the compare plot download: ' + plot.text.slice(0, 120));
        // At 20% of the width every curve has a row: the hover marks the three.
        const box = await page.locator('#compare-chart').boundingBox();
        await page.mouse.move(box.x + box.width * 0.2, box.y + box.height * 0.5);
        await page.locator('#compare-chart g.hover').waitFor({timeout: 5000});
        const circles = await page.locator('#compare-chart g.hover circle').count();
        if (circles !== 3) fail('the hover marks ' + circles + ' curves');
        const lines = await page.locator('#compare-chart g.hover text').allTextContents();
        if (lines.length !== 4 || !/^round \d+$/.test(lines[0])) fail('the hover says ' + lines.join(' | '));
        await page.screenshot({path: join(shots, 'compare.png'), fullPage: true});
        await page.mouse.move(5, 5);
    });

    await check('the experiments page pages through next_cursor', async () => {
        const r = await call('POST', '/v1/experiments', {name: 'small',
            base: {dataset: 'heart_scale', workers: 2, max_rounds: 50, compressor: {type: 'topk', k: 3}},
            variants: [{algorithm: 'eclk'}, {algorithm: 'ec-gd'}]});
        if (r.status !== 201) fail('experiment submit: ' + r.status + ' ' + JSON.stringify(r.doc));
        await page.goto(base + '/#/experiments?limit=1');
        const shown = () => page.evaluate(() =>
            [...document.querySelectorAll('#experiments tr[data-experiment]')].map(t => t.dataset.experiment));
        await page.locator(`#experiments tr[data-experiment="${r.doc.id}"]`).waitFor({timeout: 10000});
        if ((await shown()).length !== 1) fail('page 1 shows ' + (await shown()).join(' '));
        const before = urls.length;
        await page.click('#page-next');
        await page.locator(`#experiments tr[data-experiment="${experimentId}"]`).waitFor({timeout: 10000});
        if ((await shown()).length !== 1) fail('page 2 shows ' + (await shown()).join(' '));
        if (!urls.slice(before).some(u => /\/v1\/experiments\?limit=1&cursor=/.test(u))) fail('no request with the cursor');
        if (!(await page.locator('#page-next').isDisabled())) fail('a third page is offered');
        await page.click('#page-prev');
        await page.locator(`#experiments tr[data-experiment="${r.doc.id}"]`).waitFor({timeout: 10000});
        await waitJobs(r.doc.jobs.map(j => j.id));
    });

    await check('a tuned experiment is grouped by variant: a colour each, a dash per multiplier, the best run of each', async () => {
        const r = await call('POST', '/v1/experiments', {name: 'tuned',
            base: {dataset: 'heart_scale', workers: 2, max_rounds: 300, target: 1e-6, lambda2_rel: 1e-2,
                   compressor: {type: 'topk', k: 3}},
            variants: [{algorithm: 'eclk'}, {algorithm: 'ec-gd'}], tune: {grid: [0.5, 2]}});
        if (r.status !== 201) fail('experiment submit: ' + r.status + ' ' + JSON.stringify(r.doc));
        const names = r.doc.jobs.map(j => j.name);
        if (names[0] !== 'eclk topk k=3 x0.5' || names[5] !== 'ec-gd topk k=3 x1')
            fail('the runs are named ' + names.join(', '));
        await waitJobs(r.doc.jobs.map(j => j.id));
        await page.goto(base + '/#/experiments/' + r.doc.id);
        await page.waitForFunction(() => {
            const c = document.getElementById('compare-chart');
            return c && c.getAttribute('data-series') === '6' &&
                [...c.querySelectorAll('path.curve')].every(p => (p.getAttribute('d').match(/L/g) || []).length >= 3);
        }, null, {timeout: 20000});
        const curves = await page.locator('#compare-chart path.curve').evaluateAll(ps => ps.map(p => ({
            group: p.getAttribute('data-group'), stroke: p.getAttribute('stroke'),
            dash: p.getAttribute('stroke-dasharray') || ''})));
        for (const g of ['0', '1']) {
            const mine = curves.filter(c => c.group === g);
            if (mine.length !== 3) fail(`variant ${g} has ${mine.length} curves`);
            if (new Set(mine.map(c => c.stroke)).size !== 1) fail(`variant ${g} has colours ${mine.map(c => c.stroke)}`);
            if (new Set(mine.map(c => c.dash)).size !== 3) fail(`variant ${g} repeats a dash`);
        }
        if (curves[0].stroke === curves[3].stroke) fail('both variants have one colour');
        const legend = await page.locator('#compare-chart .legend-name').allTextContents();
        for (const want of ['eclk, topk k=3 x0.5', 'eclk, topk k=3 x1', 'ec-gd, topk k=3 x2'])
            if (!legend.includes(want)) fail('the legend lacks ' + want + ': ' + legend.join(' | '));
        const runs = await page.locator('#comparison td.run-label').allTextContents();
        if (runs[1] !== 'eclk, topk k=3 x2') fail('the table names the runs ' + runs.join(' | '));
        await page.screenshot({path: join(shots, 'experiment-grouped.png'), fullPage: true});
        // The best run per variant: one curve and one row each.
        await page.selectOption('#runs-view', 'best');
        await page.locator('#compare-chart[data-series="2"]').waitFor({timeout: 5000});
        const visible = await page.locator('#comparison tbody tr[data-job]:not([hidden])').count();
        if (visible !== 2) fail(visible + ' rows shown for the best runs');
        if (!/runs=best/.test(page.url())) fail('the address does not keep the view: ' + page.url());
        const x = (await call('GET', '/v1/experiments/' + r.doc.id)).doc;
        const shownIds = await page.locator('#comparison tbody tr[data-job]:not([hidden])')
            .evaluateAll(rs => rs.map(t => t.dataset.job));
        for (const t of x.tuned)
            if (t.best && !shownIds.includes(t.best.job)) fail('the best run ' + t.best.job + ' is not shown');
        // Its best multiplier on the tune's axis, the default one: smoothness.
        const bestCells = await page.locator('#tuned tbody tr td:nth-child(3)').allTextContents();
        const wantCells = x.tuned.map(t => t.best ? 'x' + t.best.multiplier + ' (smoothness)' : '-');
        if (bestCells.join('|') !== wantCells.join('|'))
            fail('the best multipliers read ' + bestCells.join(' | ') + ', not ' + wantCells.join(' | '));
        if (!x.tuned.some(t => t.best)) fail('no variant has a best run to show');
        await page.screenshot({path: join(shots, 'experiment-best.png'), fullPage: true});
    });

    await check('an experiment with seeds draws one median per group with a band from least to greatest', async () => {
        const r = await call('POST', '/v1/experiments', {name: 'seeded',
            base: {dataset: 'heart_scale', workers: 2, max_rounds: 200, target: 1e-6, lambda2_rel: 1e-2,
                   eval_every: 10, compressor: {type: 'randk', k: 3}},
            variants: [{algorithm: 'ec-sgd-diana'}, {algorithm: 'eclk'}], seeds: 3});
        if (r.status !== 201) fail('experiment submit: ' + r.status + ' ' + JSON.stringify(r.doc));
        await waitJobs(r.doc.jobs.map(j => j.id));
        await page.goto(base + '/#/experiments/' + r.doc.id + '?runs=seeds');
        await page.waitForFunction(() => {
            const c = document.getElementById('compare-chart');
            return c && c.getAttribute('data-series') === '2' &&
                c.querySelectorAll('path.band').length === 2;
        }, null, {timeout: 20000});
        const legend = await page.locator('#compare-chart .legend-name').allTextContents();
        // (the legend cuts a name at 32 characters)
        if (legend.length !== 2 || !legend.every(t => /^(ec-sgd-diana|eclk), randk k=3: median/.test(t)))
            fail('the legend reads ' + legend.join(' | '));
        // Each band holds its median: the band's fill is its curve's colour.
        const fills = await page.locator('#compare-chart path.band').evaluateAll(ps => ps.map(p => p.getAttribute('fill')));
        const strokes = await page.locator('#compare-chart path.curve').evaluateAll(ps => ps.map(p => p.getAttribute('stroke')));
        if (fills.join('|') !== strokes.join('|')) fail('bands ' + fills.join(',') + ' beside curves ' + strokes.join(','));
        if ((await page.locator('#runs-view option[value=seeds]').getAttribute('hidden')) !== null)
            fail('the seeds view is hidden for an experiment with seeds');
        await page.screenshot({path: join(shots, 'experiment-seeds.png'), fullPage: true});
        await page.selectOption('#runs-view', 'all');
        await page.locator('#compare-chart[data-series="6"]').waitFor({timeout: 5000});
    });

    await check('the datasets page uploads a file, and shows the service\'s message for a bad one', async () => {
        await page.goto(base + '/#/datasets');
        await page.locator('#upload-form').waitFor();
        await page.setInputFiles('#upload-file', {name: 'tiny.svm', mimeType: 'application/octet-stream',
            buffer: Buffer.from('+1 1:0.5 3:1\n-1 2:1\n+1 1:1 2:0.25\n-1 3:0.5\n')});
        await page.fill('#upload-name', 'tiny');
        await page.click('#upload-submit');
        await page.locator('#upload-status', {hasText: 'uploaded tiny'}).waitFor({timeout: 20000});
        const row = page.locator('#datasets tr[data-dataset=tiny]');
        await row.waitFor({timeout: 10000});
        if ((await row.locator('td.rows').textContent()) !== '4') fail('tiny rows ' + await row.locator('td.rows').textContent());
        await page.screenshot({path: join(shots, 'datasets-upload.png'), fullPage: true});
        await page.setInputFiles('#upload-file', {name: 'bad.svm', mimeType: 'application/octet-stream',
            buffer: Buffer.from('+1 1:0.5\nnot a row\n')});
        await page.fill('#upload-name', 'bad');
        await page.click('#upload-submit');
        await page.locator('#upload-status.problem', {hasText: 'bad:2: label'}).waitFor({timeout: 20000});
        if ((await call('GET', '/v1/datasets/bad')).status !== 404) fail('a bad upload left a dataset');
    });

    await check('the datasets page lists the data directory', async () => {
        await page.click('#nav-datasets');
        const row = page.locator('#datasets tr[data-dataset=mushrooms]');
        await row.waitFor({timeout: 10000});
        if ((await row.locator('td.rows').textContent()) !== '8124') fail('mushrooms rows ' + await row.locator('td.rows').textContent());
        if ((await row.locator('td.d').textContent()) !== '112') fail('mushrooms d ' + await row.locator('td.d').textContent());
        const api = (await call('GET', '/v1/datasets')).doc.datasets;
        const shown = await page.locator('#datasets tbody tr[data-dataset]').count();
        if (shown !== api.length) fail(`${shown} rows for ${api.length} datasets`);
        for (const d of api.filter(d => d.error)) {
            const err = await page.locator(`#datasets tr[data-dataset="${d.name}"] .dataset-error`).textContent();
            if (err !== d.error) fail(`${d.name}: ${err}`);
        }
        await page.screenshot({path: join(shots, 'datasets.png'), fullPage: true});
        await row.locator('a', {hasText: 'jobs'}).click();
        await page.waitForURL(/#\/\?dataset=mushrooms$/);
        if ((await page.locator('#dataset-filter').inputValue()) !== 'mushrooms') fail('the dataset filter is not set');
        const all = (await call('GET', '/v1/jobs?dataset=mushrooms&limit=500')).doc.jobs.map(j => j.id);
        await tableSettles(w => {
            const got = [...document.querySelectorAll('#jobs tbody tr[data-job]')].map(r => r.dataset.job);
            return got.length === w.length && w.every(id => got.includes(id));
        }, 'the jobs of mushrooms', all);
    });

    await check('the menus are the API\'s lists (GET /v1/vocabulary)', async () => {
        const v = (await call('GET', '/v1/vocabulary')).doc;
        const options = async sel => page.locator(sel + ' option').evaluateAll(
            os => os.map(o => o.value).filter(x => x !== ''));
        const same = (what, got, want) => {
            if (JSON.stringify(got) !== JSON.stringify(want))
                fail(what + ': the menu has ' + got.join(',') + ', the API ' + want.join(','));
        };
        await page.click('#nav-submit');
        await page.locator('#job-form').waitFor();
        same('algorithms', await options('select[name=algorithm]'), v.algorithms.map(a => a.name));
        same('compressors', await options('select[name=compressor]'),
             v.compressors.filter(c => c.contraction).map(c => c.name));
        /* adiana takes only the compressors with an unbiased form: topk is
           disabled for it, and a topk choice moves to one it takes. */
        const enabled = async () => page.locator('select[name=compressor] option').evaluateAll(
            os => os.filter(o => !o.disabled).map(o => o.value));
        const unbiased = v.compressors.filter(c => c.contraction && c.unbiased_form).map(c => c.name);
        const adiana = v.algorithms.find(a => a.name === 'adiana');
        if (!adiana || adiana.compressor_kind !== 'unbiased')
            fail('the vocabulary does not say adiana takes unbiased compressors only');
        await page.selectOption('select[name=compressor]', 'topk');
        await page.selectOption('select[name=algorithm]', 'adiana');
        same('adiana\'s compressors', await enabled(), unbiased);
        if (unbiased.indexOf(await page.locator('select[name=compressor]').inputValue()) < 0)
            fail('with adiana the compressor stayed on one it does not take');
        await page.selectOption('select[name=algorithm]', 'lkatyusha');
        same('lkatyusha\'s compressors', await enabled(), ['none']);
        await page.selectOption('select[name=algorithm]', 'eclk');
        same('eclk\'s compressors', await enabled(), v.compressors.filter(c => c.contraction).map(c => c.name));
        same('datasets', await options('select[name=dataset]'),
             (await call('GET', '/v1/datasets')).doc.datasets.filter(d => !d.error).map(d => d.name));
        await page.screenshot({path: join(shots, 'submit.png')});
        await page.click('#nav-jobs');
        await page.locator('#stop-filter').waitFor();
        same('stop reasons', await options('#stop-filter'), v.stop_reasons.map(r => r.name));
        same('algorithm filter', await options('#algorithm-filter'), v.algorithms.map(a => a.name));
    });

    await check('the form offers EF21-P\'s broadcast and partial participation where the algorithm admits them', async () => {
        const v = (await call('GET', '/v1/vocabulary')).doc;
        await page.click('#nav-submit');
        await page.locator('#job-form').waitFor();
        const downs = await page.locator('select[name=compressor_down] option').evaluateAll(os => os.map(o => o.value));
        const want = ['none'].concat(v.compressors.filter(c => c.broadcast).map(c => c.name));
        if (JSON.stringify(downs) !== JSON.stringify(want))
            fail('broadcast menu ' + downs.join(',') + ', the API ' + want.join(','));
        for (const a of v.algorithms) {
            await page.selectOption('select[name=algorithm]', a.name);
            const downOff = await page.locator('select[name=compressor_down]').isDisabled();
            const partOff = await page.locator('input[name=participation]').isDisabled();
            if (downOff === !!a.compressed_broadcast)
                fail(a.name + ': the broadcast menu is ' + (downOff ? 'disabled' : 'enabled'));
            if (partOff === !!a.partial_participation)
                fail(a.name + ': participation is ' + (partOff ? 'disabled' : 'enabled'));
        }
        const gd = v.algorithms.find(a => a.compressed_broadcast && a.partial_participation);
        if (!gd) fail('no algorithm admits both');
        await page.selectOption('select[name=dataset]', 'mushrooms');
        await page.selectOption('select[name=algorithm]', gd.name);
        await page.selectOption('select[name=compressor_down]', 'topk');
        await page.fill('input[name=k_down]', '5');
        await page.fill('input[name=participation]', '0.5');
        await page.fill('input[name=workers]', '4');
        await page.fill('input[name=max_rounds]', '50');
        await page.fill('input[name=name]', '');
        await page.fill('#labels-input', '');
        await page.click('#submit-job');
        await page.waitForURL(/#\/jobs\/j_[0-9a-f]{16}$/, {timeout: 10000});
        const id = page.url().split('/').pop();
        const doc = (await call('GET', '/v1/jobs/' + id)).doc;
        if (!doc.spec || !doc.spec.compressor_down || doc.spec.compressor_down.type !== 'topk' ||
            doc.spec.compressor_down.k !== 5 || doc.spec.participation !== 0.5)
            fail('the job was submitted as ' + JSON.stringify(doc.spec));
        if ((await page.locator('#fact-down').textContent({timeout: 10000})) !== 'topk k=5')
            fail('the job page says broadcast ' + await page.locator('#fact-down').textContent());
        if ((await page.locator('#fact-participation').textContent()) !== '0.5')
            fail('the job page says participation ' + await page.locator('#fact-participation').textContent());
        await waitJobs([id]);
    });

    await check('no script error, and the token never went into a URL', async () => {
        if (problems.length) fail(problems.join('; '));
        const leaked = urls.filter(u => u.includes(TOKEN));
        if (leaked.length) fail('the token is in ' + leaked[0]);
        if (serverLog.includes(TOKEN)) fail('the token is in the server log');
        const san = serverLog.match(/.*(AddressSanitizer|runtime error:).*/);
        if (san) fail('the server reported: ' + san[0]);
    });
}

function cleanup() {
    if (server && server.exitCode === null) server.kill('SIGTERM');
    rmSync(tmp, {recursive: true, force: true});
}

main().then(async () => {
    await browser.close();
    cleanup();
    console.log(`screenshots in ${shots}`);
    console.log(`browser: ${passed} passed, ${failed} failed`);
}, async e => {
    if (browser) await browser.close().catch(() => {});
    cleanup();
    if (!failed) console.log(`FAIL setup: ${e.message}`);
    console.log(`browser: ${passed} passed, ${failed || 1} failed`);
    process.exit(1);
});
