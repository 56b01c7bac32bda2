// ember-memviz in a real browser: headless Chromium opens the page of a snapshot written
// by memviz_sample_snapshot, reads the segment count and the top allocation site, hovers
// a block and reads its size, keeps a screenshot, and sees no console error and no
// request but the page itself. With --train BIN it does the same checks on the snapshot
// the training example writes at the end of its first epoch (a short run on one emulated
// device). With --bench-events N it also times a page made from a synthetic N-entry trace.
//
// node memviz-browser-test.mjs --memviz BIN --sample BIN --out DIR [--train BIN] [--bench-events N]
import { execFileSync } from "node:child_process";
import { createWriteStream, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { Browser } from "./webdriver.mjs";

const options = {};
for (let i = 2; i < process.argv.length; i += 2) options[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
for (const required of ["memviz", "sample", "out"]) {
  if (!options[required]) { console.error("missing --" + required); process.exit(2); }
}
const out = resolve(options.out);
mkdirSync(out, { recursive: true });

let failures = 0;
function check(condition, what, detail) {
  console.log((condition ? "ok    " : "FAIL  ") + what + (detail === undefined ? "" : ": " + detail));
  if (!condition) failures++;
}

function makePage(snapshot, page) {
  const started = process.hrtime.bigint();
  const report = execFileSync(options.memviz, [snapshot, "-o", page], { encoding: "utf8" }).trim();
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, report };
}

// Opens `page`; returns the requests it made besides itself and its console errors.
async function open(browser, page) {
  const url = pathToFileURL(page).href;
  await browser.requests();  // drop what came before
  await browser.log("browser");
  const started = process.hrtime.bigint();
  await browser.goto(url);
  const loadMs = Number(process.hrtime.bigint() - started) / 1e6;
  // Anything the page asked for besides itself, and anything at all over the network
  // (Chromium's own pages, such as the first tab's, load chrome:// resources: not ours).
  const others = (await browser.requests())
    .filter((r) => (r.document === url && r.url !== url && !r.url.startsWith("data:")) || /^(https?|wss?|ftp):/.test(r.url))
    .map((r) => r.url);
  const errors = (await browser.log("browser")).filter((e) => e.level === "SEVERE").map((e) => e.message);
  return { loadMs, others, errors };
}

async function sampleChecks(browser) {
  const snapshotPath = join(out, "sample.json");
  execFileSync(options.sample, [snapshotPath], { stdio: "inherit" });
  // Qualified from the symbol table ("sample::run_activations(int)"), or the short name
  // debug information gives ("run_activations (sample_snapshot.cpp:41)").
  await pageChecks(browser, "sample", snapshotPath, /^(sample::)?run_activations\b/,
    /allocate_weights|run_activations|accumulate_gradients|free_while_in_use/);
}

// The training example's own snapshot (a 4-step run on one emulated device).
async function trainChecks(browser) {
  const snapshotPath = join(out, "train.json");
  const env = { ...process.env, EMBER_EMULATED_DEVICES: "1" };
  delete env.CUDA_VISIBLE_DEVICES;
  execFileSync(options.train, ["--epochs", "1", "--limit", "4", "--workers", "0", "--device", "cuda:0",
    "--memory-snapshot", snapshotPath], { stdio: "inherit", env });
  // Every allocation comes from main (ember's own frames are not sites); stacks pass through ember.
  await pageChecks(browser, "train", snapshotPath, /^main\b/, /ember::/);
}

async function pageChecks(browser, name, snapshotPath, topSitePattern, stackPattern) {
  const pagePath = join(out, name + ".html");
  console.log(makePage(snapshotPath, pagePath).report);
  const snapshot = JSON.parse(readFileSync(snapshotPath, "utf8"));

  const { others, errors } = await open(browser, pagePath);
  check(others.length === 0, name + ": no network request", others.join(", ") || "none");
  const expectedSegments = snapshot.segments.filter((s) => s.device === 0).length;
  const shownSegments = await browser.run("return document.getElementById('segment-count').textContent");
  check(Number(shownSegments) === expectedSegments && expectedSegments > 0, name + ": segment count of cuda:0",
    `page ${shownSegments}, snapshot ${expectedSegments}`);
  const topSite = await browser.run("return document.querySelector('#sites tbody tr td.site').textContent");
  check(topSitePattern.test(topSite), name + ": top allocation site", topSite);

  // Hover the largest allocated block of cuda:0 and read the size the page shows.
  const target = await browser.run(`
    const segments = window.memviz.device().segments;
    let best = null;
    segments.forEach((segment, s) => segment.blocks.forEach((block, b) => {
      if (block[3] === "allocated" && (!best || block[1] > best.size)) best = { s, b, address: block[0], size: block[1] };
    }));
    document.getElementById("segments").scrollIntoView();
    return Object.assign(best, window.memviz.blockCenter(best.s, best.b));`);
  await browser.moveMouse(target.x, target.y);
  const shown = await browser.run(`
    const tip = document.getElementById("tooltip"), size = tip.querySelector(".size");
    return { hidden: tip.hidden, bytes: size && Number(size.dataset.bytes), text: size && size.textContent,
             html: tip.innerHTML };`);
  const original = snapshot.segments.flatMap((s) => s.blocks).find((b) => "0x" + b.address.toString(16) === target.address);
  check(!shown.hidden && original !== undefined && shown.bytes === original.size,
    name + ": hovered block's size", `${shown.text} (${shown.bytes} bytes), snapshot ${original && original.size} bytes`);
  check(stackPattern.test(shown.html), name + ": hovered block's stack names the program's function");
  writeFileSync(join(out, `memviz-${name}.png`), await browser.screenshot());
  console.log("screenshot: " + join(out, `memviz-${name}.png`));
  const late = (await browser.log("browser")).filter((e) => e.level === "SEVERE").map((e) => e.message);
  check(errors.length === 0 && late.length === 0, name + ": no console error", [...errors, ...late].join(" | ") || "none");
}

// A training-like synthetic trace: three streams, sizes from 512 B to 64 MiB, most
// allocations freed soon, some kept; 40 call sites.
async function writeSyntheticSnapshot(path, events) {
  const stream = createWriteStream(path);
  const write = (text) => new Promise((done) => (stream.write(text) ? done() : stream.once("drain", done)));
  let seed = 12345;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const sites = Array.from({ length: 40 }, (_, i) =>
    JSON.stringify([{ name: `model::layer${i}::forward()`, filename: `/src/model/layer${i}.cpp`, line: 10 + i }]));
  const live = [];
  let address = 0x7f0000000000, time = 1700000000000000, written = 0, chunk = [];
  await write('{"segments": [], "device_traces": [[');
  while (written < events) {
    let entry;
    if (live.length > 0 && (random() < 0.48 || live.length > 3000)) {
      const [a] = live.splice(Math.floor(random() * Math.min(live.length, 64)) + Math.max(0, live.length - 64), 1);
      entry = `{"action":"free_completed","addr":${a.addr},"size":${a.size},"stream":${a.stream},"time_us":${time},"frames":${sites[a.site]}}`;
    } else {
      const size = Math.ceil(512 * Math.pow(2, random() * 17) / 512) * 512;
      const a = { addr: address, size, stream: Math.floor(random() * 3), site: Math.floor(random() * 40) };
      address += size;
      live.push(a);
      entry = `{"action":"alloc","addr":${a.addr},"size":${a.size},"stream":${a.stream},"time_us":${time},"frames":${sites[a.site]}}`;
    }
    time += 3;
    chunk.push(entry);
    if (++written % 20000 === 0 || written === events) {
      await write((written > chunk.length ? "," : "") + chunk.join(","));
      chunk = [];
    }
  }
  await write("]]}\n");
  await new Promise((done) => stream.end(done));
}

async function benchmark(browser, events) {
  const snapshotPath = join(out, `synthetic-${events}.json`), pagePath = join(out, `synthetic-${events}.html`);
  await writeSyntheticSnapshot(snapshotPath, events);
  const snapshotBytes = statSync(snapshotPath).size;
  const made = makePage(snapshotPath, pagePath);
  unlinkSync(snapshotPath);
  const { loadMs, others, errors } = await open(browser, pagePath);
  const timing = await browser.run(`
    const paint = performance.getEntriesByType("paint").find((p) => p.name === "first-contentful-paint");
    const nav = performance.getEntriesByType("navigation")[0];
    return { fcp: paint ? paint.startTime : null, load: nav ? nav.loadEventEnd : null, render: window.memviz.renderMs };`);
  check(others.length === 0 && errors.length === 0, `${events}-event page: no request, no console error`,
    [...others, ...errors].join(" | ") || "none");
  writeFileSync(join(out, `memviz-synthetic-${events}.png`), await browser.screenshot());
  const line = `memviz-bench: ${events} trace entries (snapshot ${(snapshotBytes / 1048576).toFixed(1)} MiB): ` +
    `ember-memviz ${made.seconds.toFixed(2)} s, page ${(statSync(pagePath).size / 1024).toFixed(0)} KiB; ` +
    `headless Chromium: first contentful paint ${timing.fcp === null ? "n/a" : timing.fcp.toFixed(0) + " ms"}, ` +
    `load event ${timing.load === null ? "n/a" : timing.load.toFixed(0) + " ms"}, page script ${timing.render.toFixed(0)} ms, ` +
    `navigation round trip ${loadMs.toFixed(0)} ms`;
  console.log(line);
  writeFileSync(join(out, "memviz-bench.txt"), line + "\n");
}

const browser = await Browser.start();
try {
  await sampleChecks(browser);
  if (options.train) await trainChecks(browser);
  if (options["bench-events"]) await benchmark(browser, Number(options["bench-events"]));
} catch (error) {
  check(false, "browser test ran", error.stack || String(error));
} finally {
  await browser.close();
}
console.log(failures === 0 ? "memviz browser test: passed" : `memviz browser test: ${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
