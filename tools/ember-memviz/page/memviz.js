// ember-memviz page: draws the data ember-memviz computed (see tools/ember-memviz/view.h).
// Everything is drawn on canvases: a million trace entries arrive as a few thousand
// samples and bands, and no element is made per event or per block.
"use strict";
(function () {
  const started = performance.now();
  const data = JSON.parse(document.getElementById("snapshot-data").textContent);
  const frames = data.frames;  // [name, filename, line, internal]
  const stacks = data.stacks;  // [frame index, ...], innermost first
  const $ = (id) => document.getElementById(id);
  const tooltip = $("tooltip");
  const STATE_COLORS = { pending_free: "hsl(30, 90%, 55%)", inactive: "#e4e4e4" };

  // PyTorch's format_size, as memory_summary() prints sizes.
  function formatSize(bytes) {
    if (bytes <= 1024) return bytes + " bytes";
    if (bytes <= 1048576) return (bytes / 1024).toFixed(2) + " KiB";
    if (bytes <= 1073741824) return (bytes / 1048576).toFixed(2) + " MiB";
    return (bytes / 1073741824).toFixed(2) + " GiB";
  }
  function escapeHtml(text) {
    return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }
  function basename(path) { return path.slice(path.lastIndexOf("/") + 1); }
  function frameText(index) {
    const [name, file, line] = frames[index];
    return (name || "??") + (file ? "  " + file + ":" + line : "");
  }
  function siteText(index) {
    if (index < 0) return "(no stack recorded)";
    const [name, file, line] = frames[index];
    return (name || "??") + (file ? " (" + basename(file) + ":" + line + ")" : "");
  }
  // A colour per stack, so the same call site has the same colour in every view.
  function stackColor(stack, lightness) {
    const hue = stack < 0 ? 210 : (stack * 137.508) % 360;
    return "hsl(" + hue.toFixed(1) + ", 60%, " + (lightness || 58) + "%)";
  }
  function stackHtml(stack) {
    if (stack < 0 || !stacks[stack]) return '<div class="frames">no stack recorded</div>';
    const lines = stacks[stack].map((f) =>
      frames[f][3] ? '<span class="internal">' + escapeHtml(frameText(f)) + "</span>" : escapeHtml(frameText(f)));
    return '<div class="frames">' + lines.join("\n") + "</div>";
  }
  function sizeHtml(bytes) {
    return '<span class="size" data-bytes="' + bytes + '">' + formatSize(bytes) + "</span> (" + bytes + " bytes)";
  }
  function showTooltip(event, html) {
    tooltip.innerHTML = html;
    tooltip.hidden = false;
    const pad = 14, w = tooltip.offsetWidth, h = tooltip.offsetHeight;
    let x = event.clientX + pad, y = event.clientY + pad;
    if (x + w > window.innerWidth) x = Math.max(0, event.clientX - w - pad);
    if (y + h > window.innerHeight) y = Math.max(0, event.clientY - h - pad);
    tooltip.style.left = x + "px";
    tooltip.style.top = y + "px";
  }
  function hideTooltip() { tooltip.hidden = true; }

  // Sizes a canvas to its CSS width (and the given CSS height) at the screen's pixel ratio.
  function prepare(canvas, cssHeight) {
    const ratio = window.devicePixelRatio || 1, width = canvas.clientWidth || 800;
    canvas.style.height = cssHeight + "px";
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(cssHeight * ratio);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, cssHeight);
    return { ctx, width, height: cssHeight };
  }

  // ---- timeline -----------------------------------------------------------------------
  const TL = { left: 78, right: 12, top: 10, bottom: 26, height: 320 };
  let timeline = null;  // the current device's timeline with computed layout

  function lowerBound(array, value) {
    let lo = 0, hi = array.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (array[mid] < value) lo = mid + 1; else hi = mid; }
    return lo;
  }

  // Offsets of each band at each sample where it is alive, stacking in allocation order.
  function layoutTimeline(t) {
    const samples = t.samples, count = samples.length;
    const bands = t.bands.map(([first, last, size, address, stream, stack, time]) => {
      const k0 = lowerBound(samples, first), k1 = lowerBound(samples, last + 1) - 1;
      return { first, last, size, address, stream, stack, time, k0, k1, offsets: new Float64Array(Math.max(0, k1 - k0 + 1)) };
    });
    const drawnTop = new Float64Array(count);
    let next = 0;
    const active = [];
    for (let k = 0; k < count; k++) {
      while (next < bands.length && bands[next].k0 <= k) { if (bands[next].k1 >= bands[next].k0) active.push(bands[next]); next++; }
      let offset = 0, write = 0;
      for (let i = 0; i < active.length; i++) {
        const band = active[i];
        if (band.k1 < k) continue;  // ended: dropped from the active list
        active[write++] = band;
        if (band.k0 > k) continue;
        band.offsets[k - band.k0] = offset;
        offset += band.size;
      }
      active.length = write;
      drawnTop[k] = offset;
    }
    let maxY = 0;
    for (let k = 0; k < count; k++) maxY = Math.max(maxY, t.totals[k]);
    return Object.assign({}, t, { bands, drawnTop, maxY: maxY > 0 ? maxY * 1.05 : 1 });
  }

  function drawTimeline() {
    const canvas = $("timeline");
    const { ctx, width, height } = prepare(canvas, TL.height);
    const t = timeline;
    const plotW = width - TL.left - TL.right, plotH = height - TL.top - TL.bottom;
    const count = t.samples.length, step = plotW / count;
    const xLeft = (k) => TL.left + k * step, yOf = (bytes) => TL.top + plotH * (1 - bytes / t.maxY);
    // Axes: bytes on the left, trace positions below.
    ctx.fillStyle = "#555"; ctx.font = "11px system-ui, sans-serif"; ctx.strokeStyle = "#eee";
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (let i = 0; i <= 4; i++) {
      const bytes = (t.maxY / 1.05) * i / 4, y = yOf(bytes);
      ctx.beginPath(); ctx.moveTo(TL.left, y); ctx.lineTo(width - TL.right, y); ctx.stroke();
      ctx.fillText(formatSize(Math.round(bytes)), TL.left - 6, y);
    }
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (let i = 0; i <= 4; i++) {
      const k = Math.min(count - 1, Math.floor((count - 1) * i / 4));
      ctx.fillText("event " + t.samples[k], Math.min(width - 40, Math.max(TL.left + 20, xLeft(k) + step / 2)), height - TL.bottom + 6);
    }
    // One polygon per band, stepped per sample; then the summed rest on top.
    t.bands.forEach((band, index) => {
      if (band.k1 < band.k0) return;
      // Same stack, same hue; neighbours told apart by lightness.
      ctx.fillStyle = stackColor(band.stack, 50 + (index % 3) * 9);
      ctx.beginPath();
      for (let k = band.k0; k <= band.k1; k++) {
        const y = yOf(band.offsets[k - band.k0] + band.size);
        if (k === band.k0) ctx.moveTo(xLeft(k), y); else ctx.lineTo(xLeft(k), y);
        ctx.lineTo(xLeft(k + 1), y);
      }
      for (let k = band.k1; k >= band.k0; k--) {
        const y = yOf(band.offsets[k - band.k0]);
        ctx.lineTo(xLeft(k + 1), y); ctx.lineTo(xLeft(k), y);
      }
      ctx.closePath(); ctx.fill();
    });
    ctx.fillStyle = "rgba(120, 120, 120, 0.45)";
    ctx.beginPath();
    for (let k = 0; k < count; k++) {
      const y = yOf(t.totals[k]);
      if (k === 0) ctx.moveTo(xLeft(k), y); else ctx.lineTo(xLeft(k), y);
      ctx.lineTo(xLeft(k + 1), y);
    }
    for (let k = count - 1; k >= 0; k--) { const y = yOf(t.drawnTop[k]); ctx.lineTo(xLeft(k + 1), y); ctx.lineTo(xLeft(k), y); }
    ctx.closePath(); ctx.fill();
    t.geometry = { plotW, plotH, step, yOf };
  }

  function timelineHover(event) {
    const t = timeline, g = t.geometry, rect = event.target.getBoundingClientRect();
    const x = event.clientX - rect.left - TL.left, y = event.clientY - rect.top - TL.top;
    if (x < 0 || x >= g.plotW || y < 0 || y > g.plotH) return hideTooltip();
    const k = Math.min(t.samples.length - 1, Math.floor(x / g.step));
    const bytes = t.maxY * (1 - y / g.plotH);
    const where = "event " + t.samples[k] + " of " + (t.positions - 1) + ", total allocated " + formatSize(t.totals[k]);
    for (const band of t.bands) {
      if (k < band.k0 || k > band.k1) continue;
      const offset = band.offsets[k - band.k0];
      if (bytes >= offset && bytes < offset + band.size) {
        return showTooltip(event, sizeHtml(band.size) + "<div>address " + band.address + ", stream " + band.stream +
          "</div><div>alive from event " + band.first + " to " + band.last +
          (band.time ? ", allocated at " + new Date(band.time / 1000).toISOString() : "") + "</div><div>" + where +
          "</div>" + stackHtml(band.stack));
      }
    }
    if (bytes >= t.drawnTop[k] && bytes < t.totals[k])
      return showTooltip(event, sizeHtml(t.totals[k] - t.drawnTop[k]) +
        "<div>smaller allocations, summed (not drawn one by one)</div><div>" + where + "</div>");
    showTooltip(event, "<div>" + where + "</div>");
  }

  // ---- segments -------------------------------------------------------------------------
  const SG = { label: 300, row: 22, gap: 4, right: 12 };
  let segments = [];

  function drawSegments() {
    const canvas = $("segments");
    const { ctx, width } = prepare(canvas, Math.max(1, segments.length) * SG.row + 4);
    const barW = width - SG.label - SG.right;
    ctx.font = "11px ui-monospace, monospace"; ctx.textBaseline = "middle";
    segments.forEach((segment, row) => {
      const y = row * SG.row + 2, h = SG.row - SG.gap;
      ctx.fillStyle = "#333"; ctx.textAlign = "left";
      ctx.fillText(segment.address + " " + formatSize(segment.total_size) + " " + segment.segment_type +
        " stream " + segment.stream, 4, y + h / 2);
      let offset = 0;
      segment.x = [];
      for (const [address, size, requested, state, stack] of segment.blocks) {
        const x0 = SG.label + barW * offset / segment.total_size;
        offset += size;
        const x1 = SG.label + barW * offset / segment.total_size;
        segment.x.push(x0);
        ctx.fillStyle = state === "allocated" ? stackColor(stack) : STATE_COLORS[state];
        ctx.fillRect(x0, y, Math.max(1, x1 - x0 - 0.5), h);
      }
      segment.x.push(SG.label + barW);
      ctx.strokeStyle = "#999"; ctx.strokeRect(SG.label - 0.5, y - 0.5, barW + 1, h + 1);
    });
  }

  function blockAt(clientX, clientY) {
    const rect = $("segments").getBoundingClientRect();
    const x = clientX - rect.left, y = clientY - rect.top - 2;
    const row = Math.floor(y / SG.row);
    if (row < 0 || row >= segments.length || y - row * SG.row > SG.row - SG.gap || x < SG.label) return null;
    const segment = segments[row];
    const i = lowerBound(segment.x, x + 1e-9) - 1;
    return i >= 0 && i < segment.blocks.length ? { segment, block: segment.blocks[i] } : null;
  }

  function segmentsHover(event) {
    const hit = blockAt(event.clientX, event.clientY);
    if (!hit) return hideTooltip();
    const [address, size, requested, state, stack] = hit.block, s = hit.segment;
    showTooltip(event, sizeHtml(size) + "<div>" + state.replace("_", " ") +
      (state !== "inactive" ? ", requested " + formatSize(requested) : "") + "</div><div>address " + address +
      "</div><div>segment " + s.address + " (" + formatSize(s.total_size) + ", " + s.segment_type + ", stream " +
      s.stream + ")</div>" + (state === "inactive" ? "" : stackHtml(stack)));
  }

  // ---- sites ------------------------------------------------------------------------------
  function fillSites(device) {
    $("sites-note").textContent = "By " + device.sites_basis + "; a site is the innermost frame outside ember, " +
      "PyTorch and the C++ library. Hover a row for a full stack.";
    const body = document.querySelector("#sites tbody");
    body.replaceChildren();
    device.sites.forEach(([site, bytes, count, stack], i) => {
      const row = body.insertRow();
      row.insertCell().textContent = String(i + 1);
      const cell = row.insertCell(); cell.className = "site"; cell.textContent = siteText(site);
      const b = row.insertCell(); b.className = "num"; b.textContent = formatSize(bytes); b.dataset.bytes = bytes;
      const c = row.insertCell(); c.className = "num"; c.textContent = String(count);
      row.addEventListener("mousemove", (event) => showTooltip(event, sizeHtml(bytes) + " in " + count +
        " allocation(s)" + stackHtml(stack)));
      row.addEventListener("mouseleave", hideTooltip);
    });
  }

  // ---- the page ---------------------------------------------------------------------------
  function showDevice(index) {
    const device = data.devices[index];
    timeline = layoutTimeline(device.timeline);
    segments = device.segments;
    $("segment-count").textContent = String(device.segment_count);
    $("segments-note").textContent = device.segments.length < device.segment_count
      ? "The " + device.segments.length + " largest of " + device.segment_count + " segments, by address." : "";
    const t = device.timeline;
    $("timeline-note").textContent = t.positions > 1
      ? device.trace_entries + " trace entries, " + (t.positions - 1) + " allocation events, " + t.allocations +
        " allocations; peak " + formatSize(t.peak) + ". Drawn at " + t.samples.length + " samples (each the peak of its " +
        "stretch); the " + t.bands.length + " allocations of largest area one by one, the rest summed in grey."
      : "No allocation history was recorded (record_memory_history(true) before the run): the allocations at the " +
        "snapshot are drawn.";
    let reserved = 0, allocated = 0;
    for (const s of device.segments) { reserved += s.total_size; allocated += s.allocated_size; }
    $("summary").textContent = "cuda:" + device.device + ": " + device.segment_count + " segments, " +
      formatSize(reserved) + " reserved, " + formatSize(allocated) + " allocated at the snapshot.";
    fillSites(device);
    drawAll();
  }
  function drawAll() {
    if (!timeline) return;
    drawTimeline();
    drawSegments();
  }

  $("source").textContent = data.source || "";
  document.title = "ember memory snapshot " + (data.source || "");
  const select = $("device");
  data.devices.forEach((device, i) => select.add(new Option("cuda:" + device.device, String(i))));
  select.addEventListener("change", () => showDevice(Number(select.value)));
  $("device-label").hidden = data.devices.length < 2;
  $("timeline").addEventListener("mousemove", timelineHover);
  $("timeline").addEventListener("mouseleave", hideTooltip);
  $("segments").addEventListener("mousemove", segmentsHover);
  $("segments").addEventListener("mouseleave", hideTooltip);
  let pending = false;
  window.addEventListener("resize", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; drawAll(); });
  });
  if (data.devices.length > 0) {
    showDevice(0);
  } else {
    $("summary").textContent = "The snapshot holds no segments and no trace: no device memory was used.";
  }

  // For tests and scripts: where a block is drawn, and how long the first render took.
  window.memviz = {
    renderMs: performance.now() - started,
    device: () => data.devices[Number(select.value || 0)],
    blockCenter(segmentIndex, blockIndex) {
      const segment = segments[segmentIndex];
      const rect = $("segments").getBoundingClientRect();
      const x0 = segment.x[blockIndex], x1 = segment.x[blockIndex + 1];
      return { x: rect.left + (x0 + x1) / 2, y: rect.top + 2 + segmentIndex * SG.row + (SG.row - SG.gap) / 2 };
    },
  };
})();
