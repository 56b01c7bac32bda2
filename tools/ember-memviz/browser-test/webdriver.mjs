// A minimal W3C WebDriver client over Node's fetch, driving Debian's chromedriver and
// headless Chromium: no npm packages, no network beyond localhost.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:net";

// The flags CI needs: root without a sandbox, no GPU, nothing phoning home.
export const CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage"];

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => { const { port } = server.address(); server.close(() => resolve(port)); });
  });
}

export class Browser {
  static async start({ chromium = "/usr/bin/chromium", chromedriver = "/usr/bin/chromedriver", width = 1400, height = 1000 } = {}) {
    const port = await freePort();
    const driver = spawn(chromedriver, ["--port=" + port], { stdio: ["ignore", "ignore", "inherit"] });
    const browser = new Browser(port, driver);
    browser.profile = mkdtempSync(join(tmpdir(), "memviz-chromium-"));
    for (let attempt = 0; ; attempt++) {
      try {
        const status = await browser.request("GET", "/status");
        if (status.ready) break;
      } catch (error) {
        if (attempt > 100) throw new Error("chromedriver did not start: " + error.message);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const session = await browser.request("POST", "/session", {
      capabilities: { alwaysMatch: {
        browserName: "chrome",
        "goog:chromeOptions": { binary: chromium, args: [...CHROMIUM_FLAGS, "--user-data-dir=" + browser.profile,
          `--window-size=${width},${height}`] },
        "goog:loggingPrefs": { browser: "ALL", performance: "ALL" },
      } },
    });
    browser.session = "/session/" + session.sessionId;
    return browser;
  }

  constructor(port, driver) {
    this.base = `http://127.0.0.1:${port}`;
    this.driver = driver;
    this.session = null;
  }

  async request(method, path, body) {
    const response = await fetch(this.base + path, {
      method, headers: { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(60000),
    });
    const json = await response.json();
    if (!response.ok) throw new Error(`${method} ${path}: ${json.value && json.value.message}`);
    return json.value;
  }

  goto(url) { return this.request("POST", this.session + "/url", { url }); }
  run(script, ...args) { return this.request("POST", this.session + "/execute/sync", { script, args }); }
  log(type) { return this.request("POST", this.session + "/se/log", { type }); }
  async screenshot() { return Buffer.from(await this.request("GET", this.session + "/screenshot"), "base64"); }
  moveMouse(x, y) {
    return this.request("POST", this.session + "/actions", { actions: [{ type: "pointer", id: "mouse",
      parameters: { pointerType: "mouse" },
      actions: [{ type: "pointerMove", duration: 0, origin: "viewport", x: Math.round(x), y: Math.round(y) }] }] });
  }

  // Requests since the last call, from Chromium's network events: { url, document },
  // document being the URL of the page that made it.
  async requests() {
    const requests = [];
    for (const entry of await this.log("performance")) {
      const message = JSON.parse(entry.message).message;
      if (message.method === "Network.requestWillBeSent")
        requests.push({ url: message.params.request.url, document: message.params.documentURL });
    }
    return requests;
  }

  async close() {
    try {
      if (this.session) await this.request("DELETE", this.session);
    } finally {
      this.driver.kill();
      rmSync(this.profile, { recursive: true, force: true });
    }
  }
}
