// The dashboard in a real browser against the real server: `ecopt serve`
// on a free port with a temporary database and authentication on, headless
// Chromium driven by playwright-core. A user enters the token, sees the
// API's 422 messages in the submit form, submits a job, watches its chart
// grow from the event stream until it succeeds, finds it in the jobs table,
// and compares an experiment's jobs. Screenshots go to docs/screenshots/.
//
// Environment: ECOPT_BIN (default build/ecopt), ECOPT_DATA_DIR (default
// ../shared/datasets), ECOPT_CHROMIUM (default /usr/bin/chromium),
// ECOPT_SCREENSHOTS (default docs/screenshots).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, mkdirSync, rmSync, existsSync } from 'node:fs';
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
const shots = resolve(root, process.env.ECOPT_SCREENSHOTS || join('docs', 'screenshots'));
const TOKEN = 'alice-browser-secret-0123456789';

const tmp = mkdtempSync(join(tmpdir(), 'ecopt-browser-'));
let server = null, browser = null, passed = 0, failed = 0, serverLog = '';

function fail(msg) {
    throw new Error(msg);
}

// Starts ecopt serve on port 0 with auth on; resolves to its base URL.
function startServer() {
    writeFileSync(join(tmp, 'tokens'), `alice:${TOKEN}\nroot:root-browser-secret-0123456789:admin\n`);
    server = spawn(bin, ['serve', '--listen', '127.0.0.1:0', '--db', join(tmp, 'ecopt.db'),
                         '--tokens-file', join(tmp, 'tokens'), '--data-dir', dataDir, '--quiet'],
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
    const problems = [], urls = [];
    page.on('pageerror', e => problems.push('page error: ' + e.message));
    page.on('console', m => {
        // Chromium logs every 4xx; the 401 before the token is entered and
        // the 422s of the form test are expected, nothing else is.
        if (m.type() === 'error' &&
            !/Failed to load resource: .* status of (401|422) /.test(m.text()))
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
        await page.fill('input[name=dataset]', 'mushrooms');
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

    let jobId = null;
    await check('a job submitted through the form runs, its chart grows live, it succeeds', async () => {
        await page.fill('input[name=k]', '5');
        await page.fill('input[name=max_rounds]', '5000');
        await page.fill('input[name=name]', 'browser test');
        await page.click('#submit-job');
        await page.waitForURL(/#\/jobs\/j_[0-9a-f]{16}$/, {timeout: 10000});
        jobId = page.url().split('/').pop();
        // Sample the state and the points drawn until the job ends.
        const samples = [];
        const t0 = Date.now();
        for (;;) {
            const s = await page.evaluate(() => ({
                state: (document.querySelector('#job-state [data-state]') || {}).textContent,
                points: Number((document.getElementById('chart') || {getAttribute: () => 0})
                               .getAttribute('data-points') || 0),
            }));
            samples.push(s);
            if (['succeeded', 'failed', 'cancelled', 'interrupted'].includes(s.state)) break;
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
        console.log(`     ${samples.length} samples; ${first} points drawn when first seen running, ${last.points} at the end`);
        // Every row with a positive gap is drawn (501 rows for 5000 rounds).
        const rows = await page.evaluate(async id => {
            const r = await fetch(`/v1/jobs/${id}/metrics?limit=10000`, {
                headers: {Authorization: 'Bearer ' + sessionStorage.getItem('ecopt.token')}});
            return (await r.json()).rows.filter(m => m.rel_gap > 0).length;
        }, jobId);
        const drawn = Number(await page.locator('#chart').getAttribute('data-points'));
        if (drawn !== rows) fail(`the chart draws ${drawn} points for ${rows} rows`);
        const d = await page.locator('#chart path.curve').getAttribute('d');
        if ((d.match(/L/g) || []).length < 10) fail('the curve has too few segments: ' + d.slice(0, 80));
        await page.locator('#fact-round', {hasText: '5000'}).waitFor();
        const params = await page.locator('#params').textContent();
        if (!params.includes('theta1') || !params.includes('step')) fail('no resolved parameters: ' + params);
        await page.screenshot({path: join(shots, 'job.png'), fullPage: true});
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
        await page.screenshot({path: join(shots, 'jobs.png')});
    });

    await check('an experiment compares its jobs with the server\'s plot', async () => {
        await page.click('#nav-submit');
        const spec = {name: 'eclk vs ec-gd vs ef21',
                      base: {dataset: 'mushrooms', workers: 10, lambda2_rel: 1e-3, max_rounds: 1500,
                             target: 1e-6, compressor: {type: 'topk', k: 5}},
                      variants: [{algorithm: 'eclk'}, {algorithm: 'ec-gd'}, {algorithm: 'ef21'}]};
        await page.fill('#experiment-spec', JSON.stringify(spec, null, 2));
        await page.click('#experiment-form button[type=submit]');
        await page.waitForURL(/#\/experiments\/x_[0-9a-f]{16}$/, {timeout: 10000});
        await page.waitForFunction(() => {
            const rows = [...document.querySelectorAll('#comparison tbody tr')];
            return rows.length === 3 && rows.every(r => {
                const s = r.querySelector('[data-state]');
                return s && ['succeeded', 'failed', 'cancelled'].includes(s.dataset.state);
            });
        }, null, {timeout: 120000});
        // The plot is reloaded after the last refresh: wait for it to be drawn.
        await page.waitForFunction(() => {
            const img = document.getElementById('experiment-plot');
            return img && img.complete && img.naturalWidth > 0;
        }, null, {timeout: 10000});
        const svg = await page.evaluate(async () => {
            const id = location.hash.split('/').pop();
            const r = await fetch(`/v1/experiments/${id}/plot.svg`, {
                headers: {Authorization: 'Bearer ' + sessionStorage.getItem('ecopt.token')}});
            return r.text();
        });
        const curves = (svg.match(/<g class="series"/g) || []).length;
        if (curves !== 3) fail(`the experiment plot has ${curves} curves`);
        await page.waitForTimeout(300);
        await page.screenshot({path: join(shots, 'experiment.png'), fullPage: true});
    });

    await check('the jobs table lists the experiment\'s jobs too', async () => {
        await page.click('#nav-jobs');
        await page.waitForFunction(() => document.querySelectorAll('#jobs tr[data-state=succeeded]').length === 4,
                                   null, {timeout: 10000});
        await page.screenshot({path: join(shots, 'jobs.png')});
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
