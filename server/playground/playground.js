// The playground's behaviour, in plain browser JavaScript (no build step): a chat that streams
// replies from POST /v1/chat/completions (SSE read with fetch and a stream reader), the sampling
// settings that go with each request, and a panel that shows GET /state once a second.

const $ = (id) => document.getElementById(id);

const ui = {
  model: $("model"),
  apiKey: $("api-key"),
  messages: $("messages"),
  notice: $("notice"),
  composer: $("composer"),
  prompt: $("prompt"),
  send: $("send"),
  stop: $("stop"),
  clear: $("clear"),
};

/** The conversation sent with each request: {role, content} in order. */
let history = [];
/** Aborts the reply being streamed, if any. */
let streaming = null;

const PANEL_INTERVAL_MS = 1000;

// ---- chat ----

function authHeaders() {
  const key = ui.apiKey.value.trim();
  return key ? { authorization: `Bearer ${key}` } : {};
}

function notify(text, isError = false) {
  ui.notice.textContent = text;
  ui.notice.classList.toggle("error", isError);
}

/** Appends a message to the list; returns the element its text goes in. */
function addMessage(role, text) {
  const item = document.createElement("li");
  item.className = `message ${role}`;
  const label = document.createElement("span");
  label.className = "role";
  label.textContent = role;
  const body = document.createElement("div");
  body.className = "text";
  body.textContent = text;
  item.append(label, body);
  ui.messages.append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

/** The sampling fields set in the form; empty ones are left to the server's defaults. */
function samplingFields() {
  const fields = {};
  for (const name of ["temperature", "top_p", "max_tokens", "seed", "reading_rate"]) {
    const value = $(name).valueAsNumber;
    if (!Number.isNaN(value)) fields[name] = value;
  }
  return fields;
}

/** An error response's message, from OpenAI's envelope when it has one. */
async function errorMessage(res) {
  const text = await res.text();
  try {
    return JSON.parse(text).error.message;
  } catch {
    return `${res.status} ${res.statusText || text}`;
  }
}

/** Yields the data payloads of a Server-Sent Events body as they arrive. */
async function* sseData(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffered += value;
      const events = buffered.split(/\r?\n\r?\n/);
      buffered = events.pop();
      for (const event of events) {
        const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (data) yield data;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

async function send(text) {
  history.push({ role: "user", content: text });
  addMessage("user", text);
  const reply = addMessage("assistant", "");
  reply.setAttribute("aria-busy", "true");
  const textNode = reply.querySelector(".text").appendChild(document.createTextNode(""));
  const meta = document.createElement("span");
  meta.className = "meta";
  reply.append(meta);

  streaming = new AbortController();
  setBusy(true);
  notify("Generating…");
  const started = performance.now();
  let firstTokenAt = null;
  let tokens = null;
  let pieces = 0;
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", ...authHeaders() },
      body: JSON.stringify({
        model: ui.model.value || "default",
        messages: history,
        stream: true,
        stream_options: { include_usage: true },
        ...samplingFields(),
      }),
      signal: streaming.signal,
    });
    if (!res.ok) throw new Error(await errorMessage(res));
    for await (const data of sseData(res.body)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      const piece = chunk.choices?.[0]?.delta?.content;
      if (piece) {
        firstTokenAt ??= performance.now();
        pieces++;
        const atBottom = isScrolledDown();
        textNode.appendData(piece);
        if (atBottom) reply.scrollIntoView({ block: "end" });
      }
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
    history.push({ role: "assistant", content: textNode.data });
    notify("");
  } catch (err) {
    if (streaming.signal.aborted) {
      history.push({ role: "assistant", content: textNode.data });
      notify("Stopped.");
    } else {
      history.pop(); // the user's message got no reply: let them edit and resend it
      reply.classList.add("error");
      textNode.appendData(textNode.data ? `\n[${err.message}]` : err.message);
      notify(err.message, true);
    }
  } finally {
    reply.setAttribute("aria-busy", "false");
    meta.textContent = replyMeta(started, firstTokenAt, tokens ?? pieces);
    streaming = null;
    setBusy(false);
  }
}

function replyMeta(started, firstTokenAt, tokens) {
  if (firstTokenAt === null) return "";
  const seconds = (performance.now() - firstTokenAt) / 1000;
  const parts = [`${tokens} tokens`, `first token ${Math.round(firstTokenAt - started)} ms`];
  if (tokens > 1 && seconds > 0) parts.push(`${((tokens - 1) / seconds).toFixed(1)} tok/s`);
  return parts.join(" · ");
}

function isScrolledDown() {
  const m = ui.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 40;
}

function setBusy(busy) {
  ui.send.disabled = busy;
  ui.stop.disabled = !busy;
  ui.clear.disabled = busy;
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = ui.prompt.value.trim();
  if (!text || streaming) return;
  ui.prompt.value = "";
  void send(text);
});

// Enter sends; Shift+Enter inserts a new line (and an IME's Enter confirms its composition).
ui.prompt.addEventListener("keydown", (event) => {
  if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
  event.preventDefault();
  ui.composer.requestSubmit();
});

ui.stop.addEventListener("click", () => streaming?.abort());

ui.clear.addEventListener("click", () => {
  history = [];
  ui.messages.replaceChildren();
  notify("");
  ui.prompt.focus();
});

// ---- models ----

async function loadModels() {
  try {
    const res = await fetch("/v1/models", { headers: authHeaders() });
    if (res.status === 401) {
      notify("This server needs an API key: enter it above.", true);
      return;
    }
    if (!res.ok) throw new Error(await errorMessage(res));
    const { data } = await res.json();
    ui.model.replaceChildren(...data.map((m) => new Option(modelLabel(m.id, m.status), m.id)));
    if (ui.notice.classList.contains("error")) notify("");
  } catch (err) {
    notify(`Models: ${err.message} (retrying)`, true);
    setTimeout(loadModels, 2000); // e.g. still loading
  }
}

ui.apiKey.addEventListener("change", loadModels);

// A model's entry says whether it is loaded: picking one that is not loads it on the first message.
function modelLabel(id, status) {
  return status === "ready" ? `${id} · loaded` : status === "loading" ? `${id} · loading` : id;
}

function renderModels(models) {
  for (const m of models ?? []) {
    const option = [...ui.model.options].find((o) => o.value === m.id);
    const label = modelLabel(m.id, m.status);
    if (option && option.text !== label) option.text = label;
  }
}

// ---- the state panel ----

const fmt = {
  count: (n) => (n === null || n === undefined ? "–" : String(n)),
  ms: (s) => (s === null || s === undefined ? "–" : `${Math.round(s * 1000)} ms`),
  rate: (r) => (r === null || r === undefined ? "–" : r.toFixed(1)),
};

function setText(id, text) {
  const el = $(id);
  if (el.textContent !== text) el.textContent = text;
}

function renderTier(name, tier) {
  const meter = $(`kv-${name}-meter`);
  if (!tier || tier.total === 0) {
    meter.value = 0;
    setText(`kv-${name}`, tier ? "no tier" : "–");
    return;
  }
  meter.value = tier.used / tier.total;
  const cached = tier.cached ? ` (+${tier.cached} cached)` : "";
  setText(`kv-${name}`, `${tier.used} / ${tier.total}${cached}`);
}

function renderStreams(streams) {
  const rows = streams.map((s) => {
    const row = document.createElement("tr");
    const cells = [
      s.id,
      s.state,
      s.generated,
      s.buffered_tokens,
      `${s.buffered_seconds.toFixed(1)} s`,
    ];
    for (const value of cells) {
      const cell = document.createElement("td");
      cell.textContent = String(value);
      row.append(cell);
    }
    return row;
  });
  if (rows.length === 0) {
    const cell = document.createElement("td");
    cell.colSpan = 5;
    cell.className = "empty";
    cell.textContent = "none";
    const row = document.createElement("tr");
    row.append(cell);
    rows.push(row);
  }
  $("streams").replaceChildren(...rows);
}

function renderPanel(s) {
  const status = $("status");
  status.textContent = s.status;
  status.className = `status ${s.status}`;
  setText("running", fmt.count(s.requests?.running));
  setText("waiting", fmt.count(s.requests?.waiting));
  setText("paused", fmt.count(s.requests?.paused));
  setText("ttft-recent", fmt.ms(s.ttft_seconds.recent));
  setText("ttft-mean", fmt.ms(s.ttft_seconds.mean));
  setText("tps-generated", fmt.rate(s.tokens_per_second.generated));
  setText("tps-sent", fmt.rate(s.tokens_per_second.sent));
  setText("tokens-generated", fmt.count(s.totals.tokens_generated));
  renderTier("device", s.kv_blocks?.device);
  renderTier("host", s.kv_blocks?.host);
  renderStreams(s.streams);
  renderModels(s.models);
  setText(
    "panel-note",
    `Rates over the last ${s.window_seconds.toFixed(1)} s · ${s.totals.steps} steps · ` +
      `${s.totals.preemptions} preemptions`,
  );
}

function showPanelStatus(text) {
  const status = $("status");
  status.textContent = text;
  status.className = "status";
}

async function refreshPanel() {
  try {
    const res = await fetch("/state", { cache: "no-store", headers: authHeaders() });
    if (res.status === 401) return showPanelStatus("needs key");
    if (!res.ok) throw new Error(await errorMessage(res));
    renderPanel(await res.json());
  } catch {
    showPanelStatus("unreachable");
  } finally {
    setTimeout(refreshPanel, PANEL_INTERVAL_MS);
  }
}

void loadModels();
void refreshPanel();
ui.prompt.focus();
