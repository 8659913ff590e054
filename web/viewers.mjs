// Loads trace outputs into real viewers in Debian's headless Chromium and reports what a
// person sees, as JSON on stdout, for the Go tests (tracer/browser_test.go) to check:
//
//   node web/viewers.mjs DIR
//
// DIR/cases.json lists {"file": NAME, "viewer": "speedscope" | "svg", "names": [...]}. Files are
// served from DIR next to speedscope's built app (node_modules/speedscope/dist/release), over
// 127.0.0.1 only. A speedscope case opens index.html#profileURL=...&view=sandwich, the import
// path a link or a drag and drop takes, waits for the sandwich table, and reads, per profile
// (picked in the profile selector): the profile's name and total weight, and every row of the
// sandwich table (total, self, name). An svg case opens the SVG and calls its flameSearch for
// every name. A screenshot of every view goes to DIR/shots.
import { chromium } from 'playwright-core';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'node_modules/speedscope/dist/release');
const dir = path.resolve(process.argv[2]);
const cases = JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'), 'utf8'));
const shots = path.join(dir, 'shots');
fs.mkdirSync(shots, { recursive: true });

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.json': 'application/json', '.wasm': 'application/wasm' };
const server = http.createServer((req, res) => {
  const u = decodeURIComponent(new URL(req.url, 'http://127.0.0.1').pathname);
  const root = u.startsWith('/data/') ? dir : dist;
  const rel = u.startsWith('/data/') ? u.slice(6) : (u === '/' ? 'index.html' : u.slice(1));
  const p = path.join(root, rel);
  if (!p.startsWith(root)) { res.writeHead(403); res.end(); return; }
  fs.readFile(p, (err, b) => {
    if (err) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'Content-Type': types[path.extname(p)] || 'application/octet-stream' });
    res.end(b);
  });
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}`;

const userData = fs.mkdtempSync(path.join(os.tmpdir(), 'msgtrace-chromium-'));
const ctx = await chromium.launchPersistentContext(userData, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--enable-unsafe-swiftshader', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 1000 },
});

// readView runs in the page: the current profile's name, the profile list, the sandwich rows.
function readView() {
  const th = [...document.querySelectorAll('th')].find((t) => t.textContent.trim() === 'Symbol Name');
  if (!th) return null;
  const box = th.closest('table').parentElement;
  const rows = [...box.querySelectorAll('tr')]
    .filter((tr) => tr.children.length === 3 && tr.children[0].tagName === 'TD')
    .map((tr) => ({ total: tr.children[0].childNodes[0].textContent, self: tr.children[1].childNodes[0].textContent, name: tr.children[2].textContent }));
  const profiles = [...document.querySelectorAll('tr[title]')]
    .filter((tr) => tr.children.length === 3)
    .map((tr) => ({ name: tr.getAttribute('title'), total: tr.children[2].textContent }));
  const title = [...document.querySelectorAll('span')].find((s) => /\(\d+\/\d+\)\s*$/.test(s.textContent));
  return { current: title ? title.firstChild.textContent.trim() : '', profiles, rows };
}

async function waitView(page, want, timeoutMs) {
  const t0 = Date.now();
  for (;;) {
    const v = await page.evaluate(readView);
    if (v && v.rows.length > 0 && (!want || v.current === want)) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`no sandwich view${want ? ' for ' + want : ''} after ${timeoutMs} ms`);
    await page.waitForTimeout(50);
  }
}

async function speedscope(c) {
  const page = await ctx.newPage();
  const warnings = [];
  page.on('console', (m) => { if (m.type() === 'warning' || m.type() === 'error') warnings.push(m.text().slice(0, 300)); });
  page.on('pageerror', (e) => warnings.push('pageerror: ' + e.message));
  const out = { file: c.file, profiles: [] };
  try {
    const t0 = Date.now();
    await page.goto(`${base}/index.html#profileURL=${encodeURIComponent(`${base}/data/${c.file}`)}&view=sandwich`);
    let v = await waitView(page, '', c.timeoutMs || 60000);
    out.loadMs = Date.now() - t0;
    const list = v.profiles.length ? v.profiles : [{ name: v.current, total: '' }];
    for (let i = 0; i < list.length; i++) {
      if (i > 0) {
        // the profile selector: click the title, then the profile's row
        await page.locator('span', { hasText: /\(\d+\/\d+\)\s*$/ }).first().click();
        await page.locator(`tr[title="${list[i].name.replace(/"/g, '\\"')}"]`).first().click();
        v = await waitView(page, list[i].name, 30000);
      }
      await page.screenshot({ path: path.join(shots, `${c.file}.${i}.png`) });
      out.profiles.push({ name: v.current, total: list[i].total, rows: v.rows });
    }
  } catch (e) {
    out.error = String(e);
    await page.screenshot({ path: path.join(shots, `${c.file}.error.png`) }).catch(() => {});
  }
  out.warnings = warnings.slice(0, 20);
  out.warningCount = warnings.length;
  await page.close();
  return out;
}

async function svg(c) {
  const page = await ctx.newPage();
  const out = { file: c.file };
  try {
    const t0 = Date.now();
    await page.goto(`${base}/data/${c.file}`);
    await page.waitForFunction(() => typeof window.flameSearch === 'function', null, { timeout: 60000 });
    out.loadMs = Date.now() - t0;
    out.found = await page.evaluate((names) => names.map((n) => window.flameSearch(n)), c.names);
    out.matched = await page.evaluate(() => document.getElementById('matched').textContent);
    // zoom into the first frame that has a child, then reset: the frame fills the width
    out.zoom = await page.evaluate(() => {
      const gs = [...document.querySelectorAll('g.f')];
      const g = gs[1];
      if (!g) return null;
      g.dispatchEvent(new MouseEvent('click'));
      const w = +g.querySelector('rect').getAttribute('width');
      document.getElementById('reset').dispatchEvent(new MouseEvent('click'));
      return w;
    });
    await page.screenshot({ path: path.join(shots, `${c.file}.png`) });
  } catch (e) {
    out.error = String(e);
    await page.screenshot({ path: path.join(shots, `${c.file}.error.png`) }).catch(() => {});
  }
  await page.close();
  return out;
}

const results = [];
try {
  for (const c of cases) {
    results.push(c.viewer === 'svg' ? await svg(c) : await speedscope(c));
  }
} finally {
  await ctx.close();
  server.close();
  fs.rmSync(userData, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(results) + '\n');
