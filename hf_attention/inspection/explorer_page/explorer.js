"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("attention-data").textContent);
  const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
                   [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];
  const state = {kind: DATA.initial.kind, layer: DATA.initial.layer, head: String(DATA.initial.head)};
  const $ = (id) => document.getElementById(id);
  const SINK_LABEL = "⟨sink⟩", SINK_GAP = 6;  // the sink's column, set apart from the keys by SINK_GAP pixels

  function colour(t) {
    t = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(t), VIRIDIS.length - 2), f = t - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
    return [0, 1, 2].map((c) => Math.round(a[c] + f * (b[c] - a[c])));
  }
  function matrix(kind, layer, head) {  // (queries × keys) for one head, or the average over heads
    const heads = DATA.kinds[kind].weights[layer];
    if (head !== "mean") return heads[Number(head)];
    return heads[0].map((row, q) => row.map((_, k) => heads.reduce((s, h) => s + h[q][k], 0) / heads.length));
  }
  function sinkColumn(kind, layer, head) {  // (queries) weights given to the sink, or null for a model without sinks
    const sinks = DATA.kinds[kind].sinks;
    if (!sinks) return null;
    const heads = sinks[layer];
    if (head !== "mean") return heads[Number(head)];
    return heads[0].map((_, q) => heads.reduce((s, h) => s + h[q], 0) / heads.length);
  }
  function largest(m) { let v = 0; for (const row of m) for (const x of row) if (x > v) v = x; return v || 1; }
  function paint(canvas, m) {
    const rows = m.length, cols = m[0].length, max = largest(m);
    canvas.width = cols; canvas.height = rows;
    const context = canvas.getContext("2d"), image = context.createImageData(cols, rows);
    for (let q = 0; q < rows; q++) for (let k = 0; k < cols; k++) {
      const [r, g, b] = colour(m[q][k] / max), o = 4 * (q * cols + k);
      image.data[o] = r; image.data[o + 1] = g; image.data[o + 2] = b; image.data[o + 3] = 255;
    }
    context.putImageData(image, 0, 0);
  }
  function option(select, value, label) {
    const o = document.createElement("option"); o.value = String(value); o.textContent = label; select.appendChild(o);
  }

  function buildControls() {
    const kind = $("kind"), layer = $("layer"), head = $("head"), info = DATA.kinds[state.kind];
    if (!kind.options.length) DATA.order.forEach((k) => option(kind, k, DATA.kinds[k].title));
    kind.value = state.kind;
    layer.textContent = ""; head.textContent = "";
    info.weights.forEach((_, i) => option(layer, i, String(i)));
    info.weights[0].forEach((_, i) => option(head, i, String(i)));
    option(head, "mean", "mean of heads");
    layer.value = String(state.layer); head.value = state.head;
  }

  function buildGrid() {
    const grid = $("grid"), info = DATA.kinds[state.kind], heads = info.weights[0].length;
    grid.textContent = "";
    const header = grid.insertRow(), corner = document.createElement("th");
    corner.textContent = "layer ↓ head →"; header.appendChild(corner);
    for (let h = 0; h <= heads; h++) {
      const th = document.createElement("th"); th.textContent = h < heads ? String(h) : "mean"; header.appendChild(th);
    }
    info.weights.forEach((_, layer) => {
      const row = grid.insertRow(), th = document.createElement("th");
      th.textContent = String(layer); row.appendChild(th);
      for (let h = 0; h <= heads; h++) {
        const head = h < heads ? String(h) : "mean", canvas = document.createElement("canvas");
        canvas.className = "thumb"; canvas.dataset.layer = String(layer); canvas.dataset.head = head;
        canvas.title = `layer ${layer}, ${head === "mean" ? "mean of heads" : "head " + head}`;
        paint(canvas, matrix(state.kind, layer, head));
        canvas.addEventListener("click", () => { state.layer = layer; state.head = head; update(false); });
        row.insertCell().appendChild(canvas);
      }
    });
  }

  let rowCells = [], columnCells = [], queryLabels = [], keyLabels = [];
  function clearHighlight() {
    document.querySelectorAll(".hl, .hl-row, .hl-col, .tok-hl").forEach((e) => e.classList.remove("hl", "hl-row",
      "hl-col", "tok-hl"));
    $("readout").textContent = "";
  }
  function highlightRow(q) {
    rowCells[q].forEach((c) => c.classList.add("hl-row")); queryLabels[q].classList.add("tok-hl");
  }
  function highlightColumn(k) {
    columnCells[k].forEach((c) => c.classList.add("hl-col")); keyLabels[k].classList.add("tok-hl");
  }

  function buildView() {
    const info = DATA.kinds[state.kind], m = matrix(state.kind, state.layer, state.head);
    const sink = sinkColumn(state.kind, state.layer, state.head);  // drawn as a last column, set apart
    const max = sink ? Math.max(largest(m), largest([sink])) : largest(m);
    const view = $("view"), rows = info.queries.length, cols = info.keys.length;
    const cell = Math.max(8, Math.min(36, Math.floor(600 / Math.max(rows, cols))));
    view.textContent = ""; view.style.setProperty("--cell", cell + "px");
    view.style.gridTemplateColumns = `auto repeat(${cols}, ${cell}px)` + (sink ? ` ${cell + SINK_GAP}px` : "");
    view.dataset.kind = state.kind; view.dataset.layer = String(state.layer); view.dataset.head = state.head;
    rowCells = info.queries.map(() => []); columnCells = info.keys.map(() => []); queryLabels = []; keyLabels = [];
    view.appendChild(document.createElement("div"));
    info.keys.forEach((token, k) => {
      const label = document.createElement("div"); label.className = "ktok"; label.dataset.k = String(k);
      label.textContent = token; label.title = `key ${k}: ${token}`;
      label.addEventListener("mouseenter", () => { clearHighlight(); highlightColumn(k);
        $("readout").textContent = `key ${k} "${token}"`; });
      label.addEventListener("mouseleave", clearHighlight);
      keyLabels.push(label); view.appendChild(label);
    });
    if (sink) {
      const label = document.createElement("div"); label.className = "ktok sink"; label.textContent = SINK_LABEL;
      label.title = "the weight each query gave its head's sink (1 − its row's sum)"; view.appendChild(label);
    }
    info.queries.forEach((token, q) => {
      const label = document.createElement("div"); label.className = "qtok"; label.dataset.q = String(q);
      label.textContent = token;
      if (info.writes && q < info.writes.length) {
        const writes = document.createElement("span"); writes.className = "writes";
        writes.textContent = ` → ${info.writes[q]}`; label.appendChild(writes);
      }
      label.title = `query ${q}: ${token}`;
      label.addEventListener("mouseenter", () => { clearHighlight(); highlightRow(q);
        $("readout").textContent = `query ${q} "${token}"`; });
      label.addEventListener("mouseleave", clearHighlight);
      queryLabels.push(label); view.appendChild(label);
      info.keys.forEach((key, k) => {
        const w = m[q][k], div = document.createElement("div"), [r, g, b] = colour(w / max);
        div.className = "cell"; div.dataset.q = String(q); div.dataset.k = String(k); div.dataset.w = String(w);
        div.style.background = `rgb(${r},${g},${b})`;
        div.title = `${token} → ${key}: ${w.toFixed(4)}`;
        div.addEventListener("mouseenter", () => { clearHighlight(); highlightRow(q); highlightColumn(k);
          div.classList.add("hl"); $("readout").textContent = `"${token}" → "${key}": ${w.toFixed(4)}`; });
        div.addEventListener("mouseleave", clearHighlight);
        rowCells[q].push(div); columnCells[k].push(div); view.appendChild(div);
      });
      if (sink) {
        const w = sink[q], div = document.createElement("div"), [r, g, b] = colour(w / max);
        div.className = "cell sink"; div.dataset.q = String(q); div.dataset.sink = "true"; div.dataset.w = String(w);
        div.style.background = `rgb(${r},${g},${b})`;
        div.title = `${token} → ${SINK_LABEL}: ${w.toFixed(4)}`;
        div.addEventListener("mouseenter", () => { clearHighlight(); highlightRow(q); div.classList.add("hl");
          $("readout").textContent = `"${token}" → ${SINK_LABEL}: ${w.toFixed(4)}`; });
        div.addEventListener("mouseleave", clearHighlight);
        rowCells[q].push(div); view.appendChild(div);
      }
    });
    const headName = state.head === "mean" ? "mean of heads" : `head ${state.head}`;
    $("view-title").textContent = `${info.title}, layer ${state.layer}, ${headName}`;
    $("legend-max").textContent = max.toFixed(3);
    $("view-note").textContent = `Rows: ${info.rows}; columns: ${info.columns}. Hover a token to highlight its ` +
      "row or column, a cell for its weight." + (info.writes ? " Row i is the decoding step that writes the token " +
      "after the arrow." : "") + (sink ? ` The last column, ${SINK_LABEL}, is the weight each query gave the ` +
      "head's sink, a learned logit in the softmax that no token carries: 1 − the row's sum." : "");
    document.querySelectorAll("#grid canvas").forEach((c) => c.classList.toggle("selected",
      c.dataset.layer === String(state.layer) && c.dataset.head === state.head));
  }

  function update(kindChanged) {
    if (kindChanged) {
      const layers = DATA.kinds[state.kind].weights.length;
      if (state.layer >= layers) state.layer = layers - 1;
    }
    buildControls();
    if (kindChanged || !$("grid").rows.length) buildGrid();
    buildView();
  }

  $("page-title").textContent = `Attention explorer: ${DATA.title}`;
  const textLine = document.createElement("span"); textLine.textContent = DATA.text;
  // A model trained with placeholder protection reads sentinels: the text is shown as it reads it, then the mapping.
  const protectedText = DATA.placeholders.length > 0;
  $("meta-text").append(protectedText ? "Text (protected, as the model reads it): " : "Text: ", textLine);
  if (protectedText) {
    $("meta-placeholders").hidden = false;
    $("meta-placeholders").textContent = "Placeholders: " +
      DATA.placeholders.map(([sentinel, original]) => `${sentinel} = ${original}`).join(", ") + ".";
  }
  if (DATA.target !== null) {
    const targetLine = document.createElement("span"); targetLine.textContent = DATA.target;
    $("meta-target").append(DATA.generated ? "Target (generated greedily): " : "Target: ", targetLine);
  }
  if (DATA.unknown_ids.length) {
    $("meta-unknown").hidden = false;
    $("meta-unknown").textContent = `Token ids the tokenizer does not know (the model's vocabulary is larger), ` +
      `shown as <id N>: ${DATA.unknown_ids.join(", ")}.`;
  }
  const legend = $("legend"), legendContext = legend.getContext("2d"), strip = legendContext.createImageData(160, 1);
  for (let i = 0; i < 160; i++) {
    const [r, g, b] = colour(i / 159); strip.data.set([r, g, b, 255], 4 * i);
  }
  legendContext.putImageData(strip, 0, 0);
  $("kind").addEventListener("change", (e) => { state.kind = e.target.value; update(true); });
  $("layer").addEventListener("change", (e) => { state.layer = Number(e.target.value); update(false); });
  $("head").addEventListener("change", (e) => { state.head = e.target.value; update(false); });
  update(true);
  document.body.dataset.ready = "true";
})();
