// The chat page of `claw serve` (claw_lib/serve/API.md): talk to the model, watch each answer get judged,
// coloured token by token and trained on. Plain JavaScript, no build step, no external resources.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const POLL_MS = 1000;
  const WINDOW_S = 60; // the timeline shows the last minute
  const MAX_EVENTS = 400;
  const STATUS_LABEL = {
    awaiting_next_state: "等待下一状态 awaiting next state",
    judging: "裁判中 judging",
    scored: "已评分，待训练 scored, waiting for training",
    excluded: "已排除（无信号） excluded (no signal)",
    trained: "已训练 trained",
    no_sample: "无样本（会话最后一回合） no sample (the session's last turn)",
  };
  const KIND_LABEL = { served: "服务 served", judged: "裁判 judged", trained: "训练 trained" };
  // statuses after which a turn no longer changes
  const FINAL = new Set(["trained", "excluded", "no_sample"]);

  const state = {
    session: null, // {id, messages: [{role, content}], done}
    turns: new Map(), // "sid#turn" -> {el, sig, greedy}
    watch: new Set(), // session ids with turns that may still change
    busy: false,
    eventsNext: 0,
    eventsRead: false, // the first read of the timeline is history: no "version live" banner for it
    events: [],
    serverNow: null, // [seconds since the server started, Date.now() when read]
  };

  // ------------------------------------------------------------------ helpers
  function newSessionId() {
    const b = new Uint8Array(6);
    crypto.getRandomValues(b);
    return "web-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function fmt(x) {
    if (typeof x !== "number") return x === null || x === undefined ? "–" : String(x);
    if (!Number.isFinite(x)) return String(x);
    if (Number.isInteger(x)) return String(x);
    const a = Math.abs(x);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? x.toExponential(2) : x.toFixed(a < 1 ? 4 : 3);
  }

  function signed(x) {
    return (x > 0 ? "+" : x < 0 ? "−" : "") + Math.abs(x).toFixed(4);
  }

  async function getJSON(path) {
    const r = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
    if (!r.ok) {
      const err = new Error(`${r.status} ${path}`);
      err.status = r.status;
      throw err;
    }
    return r.json();
  }

  function showError(msg) {
    const e = $("error");
    e.textContent = msg;
    e.hidden = !msg;
  }

  function scrollDown() {
    const c = $("conversation");
    c.scrollTop = c.scrollHeight;
  }

  function nearBottom() {
    const c = $("conversation");
    return c.scrollHeight - c.scrollTop - c.clientHeight < 60;
  }

  // ------------------------------------------------------------------ the conversation across reloads
  // localStorage (this origin: this server's host and port): "claw-page:session:<id>" holds a session's messages,
  // its answers' turn, version and greedy flag, and whether it ended; "claw-page:sessions" the ids in order (the
  // last KEEP_SESSIONS); "claw-page:current" the session the composer writes to.
  const STORE = "claw-page:";
  const KEEP_SESSIONS = 20;

  function store(key, value) {
    try { localStorage.setItem(STORE + key, JSON.stringify(value)); } catch (e) { /* full or private: not kept */ }
  }

  function load(key) {
    try { return JSON.parse(localStorage.getItem(STORE + key)); } catch (e) { return null; }
  }

  function saveSession(s) {
    store("session:" + s.id, s);
    const ids = (load("sessions") || []).filter((x) => x !== s.id).concat([s.id]);
    for (const old of ids.splice(0, Math.max(0, ids.length - KEEP_SESSIONS))) {
      try { localStorage.removeItem(STORE + "session:" + old); } catch (e) { /* nothing kept */ }
    }
    store("sessions", ids);
    store("current", state.session.id);
  }

  function showSession(s) {
    const divider = el("div", { class: "divider", "data-testid": "session-divider", "data-session-id": s.id,
      text: `新会话 new session · ${s.id}` });
    const note = $("empty-note");
    if (note && s.messages.length) note.remove();
    if (note && !s.messages.length) note.before(divider);
    else $("conversation").append(divider);
    const answers = new Map((s.answers || []).map((a) => [a.at, a]));
    s.messages.forEach((m, i) => {
      if (m.role === "user") {
        $("conversation").append(el("div", { class: "msg user", "data-testid": "user-message", "data-session-id": s.id,
          text: m.content }));
      } else if (answers.has(i)) {
        const a = answers.get(i);
        addAssistant(s.id, a.turn, a.version, m.content, a.greedy);
        if (a.turn !== null && a.turn !== undefined) state.watch.add(s.id);
      }
    });
    if (s.done) endSessionNote(s.id, true);
  }

  function restore() {
    const current = load("current");
    let resumed = null;
    for (const id of load("sessions") || []) {
      const s = load("session:" + id);
      if (!s || s.id !== id || !Array.isArray(s.messages)) continue;
      showSession(s);
      if (id === current && !s.done) resumed = s;
    }
    if (!resumed) return false;
    state.session = resumed;
    $("session-id").textContent = resumed.id;
    scrollDown();
    return true;
  }

  // ------------------------------------------------------------------ sessions
  function startSession() {
    state.session = { id: newSessionId(), messages: [], answers: [], done: false };
    $("session-id").textContent = state.session.id;
    showSession(state.session);
    saveSession(state.session);
    scrollDown();
  }

  function endSessionNote(sid, sent) {
    $("conversation").append(el("div", { class: "divider ended", "data-testid": "session-ended", "data-session-id": sid,
      text: sent ? `会话结束 session ended · ${sid}（最后一个回答不产生样本 its last answer gives no sample）`
        : `会话结束 session ended · ${sid}（未发送消息：打开的回合将超时，不产生样本 nothing sent: the open turn will time out, no sample）` }));
  }

  function setBusy(b) {
    state.busy = b;
    $("send").disabled = b;
    $("end-session").disabled = b;
    $("new-session").disabled = b;
    $("busy").hidden = !b;
  }

  async function send(done) {
    if (state.busy) return;
    const text = $("prompt").value.trim();
    const s = state.session;
    if (!text) {
      if (done && s.messages.length) { // nothing to send: end it here, the server times the open turn out
        s.done = true;
        saveSession(s);
        endSessionNote(s.id, false);
        startSession();
      }
      return;
    }
    showError("");
    const greedy = $("greedy").checked;
    const messages = s.messages.concat([{ role: "user", content: text }]);
    const body = { messages, stream: false };
    if (greedy) body.temperature = 0;
    $("empty-note")?.remove();
    const userEl = el("div", { class: "msg user", "data-testid": "user-message", "data-session-id": s.id, text });
    $("conversation").append(userEl);
    scrollDown();
    setBusy(true);
    let answer = null;
    try {
      for (let attempt = 0; ; attempt++) {
        const r = await fetch("/v1/chat/completions", {
          method: "POST",
          headers: { "Content-Type": "application/json", "X-Session-Id": s.id, "X-Turn-Type": "main",
            "X-Session-Done": done ? "true" : "false" },
          body: JSON.stringify(body),
        });
        if (r.status === 503 && attempt < 10) { // upstream: paused for a weight update, retry
          await new Promise((res) => setTimeout(res, 300));
          continue;
        }
        const data = await r.json().catch(() => null);
        if (!r.ok) {
          const msg = data && data.error && data.error.message ? data.error.message : `HTTP ${r.status}`;
          throw new Error(msg);
        }
        answer = data;
        break;
      }
    } catch (e) {
      userEl.classList.add("failed");
      showError(`请求失败 request failed: ${e.message}`);
      setBusy(false);
      return;
    }
    $("prompt").value = "";
    const content = answer.choices[0].message.content || "";
    s.messages = messages.concat([{ role: "assistant", content }]);
    const claw = answer.claw || {};
    (s.answers = s.answers || []).push({ at: s.messages.length - 1, turn: claw.turn ?? null,
      version: claw.policy_version ?? null, greedy });
    s.done = done;
    saveSession(s);
    addAssistant(s.id, claw.turn, claw.policy_version, content, greedy);
    if (done) {
      endSessionNote(s.id, true);
      startSession();
    }
    setBusy(false);
    $("prompt").focus();
    if (claw.turn !== null && claw.turn !== undefined) {
      state.watch.add(claw.session_id || s.id);
      pollSession(claw.session_id || s.id);
    }
  }

  // ------------------------------------------------------------------ answers
  function addAssistant(sid, turn, version, content, greedy) {
    const msg = el("div", { class: "msg assistant", "data-testid": "assistant-message", "data-session-id": sid,
      "data-turn": turn ?? "", "data-policy-version": version ?? "", "data-status": turn === null ? "side" : "served",
      "data-greedy": greedy ? "true" : "false" });
    const ans = el("div", { class: "answer", "data-testid": "answer" });
    ans.textContent = content;
    msg.append(ans, el("div", { class: "meta", "data-testid": "turn-meta" }));
    $("conversation").append(msg);
    const t = { el: msg, sig: "", greedy, version };
    if (turn !== null && turn !== undefined) state.turns.set(`${sid}#${turn}`, t);
    renderMeta(t, { policy_version: version, status: turn === null ? "side" : "awaiting_next_state" });
    scrollDown();
  }

  function colour(a, scale) {
    const alpha = 0.18 + 0.62 * Math.min(1, Math.abs(a) / scale);
    return a < 0 ? `rgba(220, 38, 38, ${alpha.toFixed(3)})` : `rgba(22, 163, 74, ${alpha.toFixed(3)})`;
  }

  function isSpecial(tok) {
    return tok.startsWith("<|") && tok.endsWith("|>") || tok === "</s>" || tok === "<eos>";
  }

  // a special token that ends the answer is the model's choice to stop: shown as a labelled chip (the legend and
  // the tooltip explain it), since it is an action that is scored and trained like the others
  const END_LABEL = "结束 end";
  const END_NOTE = "结束词元 end of text: 模型选择在此停止；它也是一个动作，和其他词元一样被评分、训练 " +
    "the model chose to stop here; that is an action too, scored and trained like the other tokens";

  function renderTurn(t, v) {
    const sig = JSON.stringify([v.status, v.advantages, v.trained_version, v.score, v.hint, v.votes, v.tokens]);
    if (sig === t.sig) return;
    t.sig = sig;
    const follow = nearBottom(); // keep the newest answer in view as its meta line grows
    const msg = t.el;
    msg.dataset.status = v.status;
    msg.dataset.policyVersion = v.policy_version;
    msg.dataset.trainedVersion = v.trained_version ?? "";
    msg.dataset.score = v.score ?? "";
    const ans = msg.querySelector(".answer");
    const toks = Array.isArray(v.tokens) && v.tokens.length ? v.tokens : null;
    if (toks) {
      const adv = Array.isArray(v.advantages) && v.advantages.length === toks.length ? v.advantages : null;
      const scale = adv ? Math.max(1, ...adv.map((x) => Math.abs(x))) : 1;
      const frag = document.createDocumentFragment();
      toks.forEach((tok, i) => {
        const special = isSpecial(tok);
        const end = special && i === toks.length - 1;
        const span = el("span", { class: "tok" + (special ? " special" : "") + (end ? " end" : ""), "data-testid": "token",
          "data-index": i, "data-token": tok });
        span.textContent = end ? END_LABEL : tok;
        if (adv) {
          const a = Number(adv[i]);
          span.dataset.advantage = a.toFixed(6);
          const zero = v.status === "excluded" || Math.abs(a) < 1e-6;
          span.dataset.sign = zero ? "zero" : a < 0 ? "neg" : "pos";
          span.classList.add(span.dataset.sign);
          if (!zero) span.style.backgroundColor = colour(a, scale);
        } else {
          span.classList.add("unscored");
        }
        frag.append(span);
      });
      ans.replaceChildren(frag);
      ans.dataset.scored = adv ? "true" : "false";
    }
    t.view = v;
    renderMeta(t, v);
    if (follow) scrollDown();
  }

  function renderMeta(t, v) {
    const meta = t.el.querySelector(".meta");
    const parts = [];
    parts.push(el("span", { class: "badge version", "data-testid": "turn-version", "data-version": v.policy_version ?? "",
      text: `写于策略版本 written by policy v${v.policy_version ?? "?"}` }));
    if (t.greedy) parts.push(el("span", { class: "badge greedy", text: "贪心 greedy" }));
    if (v.status !== "side") {
      parts.push(el("span", { class: `badge status s-${v.status}`, "data-testid": "turn-status", "data-status": v.status,
        text: STATUS_LABEL[v.status] || v.status }));
    } else {
      parts.push(el("span", { class: "badge", text: "旁支回合（不训练） side turn (never trained)" }));
    }
    if (v.score !== null && v.score !== undefined) {
      const votes = Array.isArray(v.votes) && v.votes.length ? ` · 投票 votes ${v.votes.map((x) => (x > 0 ? "+" : "") + x).join(" ")}` : "";
      parts.push(el("span", { class: `badge score sc-${v.score > 0 ? "pos" : v.score < 0 ? "neg" : "zero"}`,
        "data-testid": "turn-score", text: `裁判 judge ${v.score > 0 ? "+" : ""}${v.score}${votes}` }));
    }
    if (v.trained_version !== null && v.trained_version !== undefined) {
      parts.push(el("span", { class: "badge trained", "data-testid": "turn-trained-version",
        "data-version": v.trained_version, text: `训练进 trained into v${v.trained_version}` }));
    }
    if (v.hint) parts.push(el("span", { class: "hint", "data-testid": "turn-hint", text: `提示 hint: “${v.hint}”` }));
    meta.replaceChildren(...parts);
  }

  async function pollSession(sid) {
    let view;
    try {
      view = await getJSON(`/v1/claw/sessions/${encodeURIComponent(sid)}`);
    } catch (e) {
      if (e.status === 404) state.watch.delete(sid);
      return;
    }
    let open = false;
    for (const v of view.turns || []) {
      const t = state.turns.get(`${sid}#${v.turn}`);
      if (t) renderTurn(t, v);
      if (!FINAL.has(v.status)) open = true;
    }
    if (!open) state.watch.delete(sid);
  }

  // ------------------------------------------------------------------ tooltip
  function tipText(span) {
    const msg = span.closest(".msg.assistant");
    const t = msg && state.turns.get(`${msg.dataset.sessionId}#${msg.dataset.turn}`);
    const v = t && t.view;
    const lines = [`词元 token: ${JSON.stringify(span.dataset.token)}`];
    if (span.classList.contains("end")) lines.push(END_NOTE);
    if (span.dataset.advantage !== undefined) {
      lines.push(`优势 advantage: ${signed(Number(span.dataset.advantage))}` +
        (v && v.status === "excluded" ? "（已排除 excluded）" : ""));
    } else {
      lines.push(`尚未评分 not yet scored (${v ? STATUS_LABEL[v.status] || v.status : "…"})`);
    }
    if (v && v.score !== null && v.score !== undefined) {
      lines.push(`裁判 judge: ${v.score > 0 ? "+" : ""}${v.score} · 投票 votes: [${(v.votes || []).join(", ")}]`);
    }
    if (v) lines.push(`提示 hint: ${v.hint ? "“" + v.hint + "”" : "无 none"}`);
    if (v) lines.push(`策略版本 policy v${v.policy_version}` +
      (v.trained_version !== null && v.trained_version !== undefined ? ` → 训练进 trained into v${v.trained_version}` : ""));
    return lines.join("\n");
  }

  function setupTooltip() {
    const tip = $("tooltip");
    const conv = $("conversation");
    conv.addEventListener("mouseover", (e) => {
      const span = e.target.closest(".tok");
      if (!span) return;
      tip.textContent = tipText(span);
      tip.hidden = false;
      const r = span.getBoundingClientRect();
      const w = tip.offsetWidth;
      tip.style.left = `${Math.max(4, Math.min(window.innerWidth - w - 4, r.left + window.scrollX))}px`;
      tip.style.top = `${r.bottom + window.scrollY + 6}px`;
    });
    conv.addEventListener("mouseout", (e) => {
      if (e.target.closest(".tok")) tip.hidden = true;
    });
    conv.addEventListener("scroll", () => { tip.hidden = true; });
  }

  // ------------------------------------------------------------------ status, metrics
  function renderStatus(s) {
    $("conn").textContent = "已连接 connected";
    $("conn").className = "conn ok";
    const pv = $("st-policy-version");
    if (pv.textContent !== String(s.policy_version) && pv.textContent !== "–") {
      pv.classList.remove("flash");
      void pv.offsetWidth; // restart the animation
      pv.classList.add("flash");
    }
    pv.textContent = String(s.policy_version);
    $("st-turns-served").textContent = fmt(s.turns_served);
    $("st-side-turns").textContent = fmt(s.side_turns_served);
    $("st-pending").textContent = fmt(s.samples_pending);
    $("st-scored").textContent = fmt(s.samples_scored);
    $("st-excluded").textContent = fmt(s.samples_excluded);
    $("st-trained").textContent = fmt(s.samples_trained);
    $("st-batch").textContent = fmt(s.batch_size);
    $("st-strategy").textContent = `${s.strategy ?? "–"} · ${s.model ?? "–"}`;
    $("st-sessions-open").textContent = fmt(s.sessions_open);
    renderNoSession(s.requests_without_session, s.match_sessions);
    if (s.last_update_s) {
      const ago = Math.max(0, Date.now() / 1000 - s.last_update_s);
      const dur = typeof s.last_update_duration_s === "number" ? `，耗时 took ${s.last_update_duration_s.toFixed(2)} s` : "";
      $("st-last-update").textContent =
        `${new Date(s.last_update_s * 1000).toLocaleTimeString()}（${ago.toFixed(0)} s 前 ago${dur}）`;
    } else {
      $("st-last-update").textContent = "尚无 none yet";
    }
    const tr = $("st-training");
    const label = { running: "运行中 running", off: "关闭 off", stopped: "已停止 stopped" }[s.training] || s.training;
    tr.textContent = label;
    tr.className = `training t-${s.training}`;
    tr.dataset.state = s.training;
    const sr = $("st-stopped-reason");
    sr.hidden = !s.stopped_reason;
    sr.textContent = s.stopped_reason ? `训练已停止 training stopped: ${s.stopped_reason}` : "";
    renderMetrics(s.metrics || {});
    if (typeof s.uptime_s === "number") state.serverNow = [s.uptime_s, Date.now()];
  }

  function renderNoSession(n, matched) {
    $("st-no-session").textContent = fmt(n);
    const note = $("st-no-session-note");
    note.hidden = !(n > 0);
    note.dataset.matched = matched ? "true" : "false";
    note.textContent = !(n > 0) ? "" : matched
      ? `${n} 个请求没有 X-Session-Id：已按对话记录匹配到会话（--match-sessions） ${n} request(s) came without ` +
        "X-Session-Id: matched to sessions by their transcript (--match-sessions)"
      : `${n} 个请求没有 X-Session-Id：按旁支回合服务，从不训练；请发送该请求头，或用 --match-sessions 启动服务器 ` +
        `${n} request(s) came without X-Session-Id: served as side turns, never trained; send the header, or start ` +
        "the server with --match-sessions";
  }

  function renderMetrics(m) {
    const body = $("metrics").tBodies[0];
    const keys = Object.keys(m);
    if (!keys.length) {
      body.replaceChildren(el("tr", {}, el("td", { class: "muted", text: "尚无更新 no update yet" })));
      return;
    }
    body.replaceChildren(...keys.map((k) => el("tr", { "data-metric": k },
      el("th", { text: k }), el("td", { text: typeof m[k] === "object" ? JSON.stringify(m[k]) : fmt(m[k]) }))));
  }

  // ------------------------------------------------------------------ timeline
  function nowServer() {
    const lastEnd = state.events.length ? Math.max(...state.events.map((e) => e.end ?? e.start ?? 0)) : 0;
    if (!state.serverNow) return lastEnd;
    const [t, at] = state.serverNow;
    return Math.max(lastEnd, t + (Date.now() - at) / 1000);
  }

  function eventText(e) {
    const sid = e.session_id && e.session_id.length > 12 ? "…" + e.session_id.slice(-8) : e.session_id;
    const who = sid ? ` ${sid}${e.turn !== null && e.turn !== undefined ? "#" + e.turn : ""}` : "";
    const ver = e.version !== null && e.version !== undefined ? (e.kind === "trained" ? ` → v${e.version}` : ` v${e.version}`) : "";
    const dur = typeof e.end === "number" && typeof e.start === "number" ? ` (${(e.end - e.start).toFixed(2)} s)` : "";
    return `${(e.end ?? e.start ?? 0).toFixed(1)} s · ${KIND_LABEL[e.kind] || e.kind}${who}${ver}${dur}`;
  }

  function renderTimeline() {
    const now = nowServer();
    // the last minute, or less while the server is younger: a newcomer's first steps spread over the track
    const first = state.events.length ? Math.min(...state.events.map((e) => e.start ?? 0)) : now;
    const span = Math.min(WINDOW_S, Math.max(10, now - first + 1));
    const t0 = now - span;
    $("timeline-span").textContent = `(最近 last ${span.toFixed(0)} s)`;
    $("axis-left").textContent = `−${span.toFixed(0)} s`;
    for (const lane of document.querySelectorAll("#timeline .lane")) {
      const kind = lane.dataset.lane;
      const track = lane.querySelector(".track");
      const marks = state.events.filter((e) => e.kind === kind && (e.end ?? e.start) >= t0).map((e) => {
        const a = Math.max(0, (e.start - t0) / span);
        const b = Math.min(1, ((e.end ?? e.start) - t0) / span);
        const m = el("span", { class: `mark k-${kind}`, "data-testid": "event-mark", "data-kind": kind, "data-i": e.i,
          title: eventText(e) });
        m.style.left = `${(a * 100).toFixed(2)}%`;
        m.style.width = `max(3px, ${((b - a) * 100).toFixed(2)}%)`;
        if (kind === "trained" && e.version !== null && e.version !== undefined) m.textContent = `v${e.version}`;
        return m;
      });
      track.replaceChildren(...marks);
    }
    const list = $("event-list");
    list.replaceChildren(...state.events.slice(-8).reverse().map((e) =>
      el("li", { class: `ev k-${e.kind}`, "data-kind": e.kind, title: e.session_id || "", text: eventText(e) })));
  }

  function versionLive(e) {
    const follow = nearBottom();
    const took = typeof e.end === "number" && typeof e.start === "number" ? (e.end - e.start).toFixed(2) : "?";
    $("empty-note")?.remove();
    $("conversation").append(el("div", { class: "live-banner", "data-testid": "version-live", "data-version": e.version,
      text: `v${e.version} 上线 live：用 ${e.samples} 个样本训练 trained on ${e.samples} samples（更新 the update ` +
        `${took} s）· 接下来的回答由 v${e.version} 写出 the next answers are written by v${e.version}` }));
    if (follow) scrollDown();
  }

  async function pollEvents() {
    const data = await getJSON(`/v1/claw/events?since=${state.eventsNext}`);
    if (Array.isArray(data.events) && data.events.length) {
      if (state.eventsRead) data.events.filter((e) => e.kind === "trained").forEach(versionLive);
      state.events.push(...data.events);
      if (state.events.length > MAX_EVENTS) state.events.splice(0, state.events.length - MAX_EVENTS);
    }
    if (typeof data.next === "number") state.eventsNext = data.next;
    state.eventsRead = true;
  }

  // ------------------------------------------------------------------ the loop
  async function tick() {
    try {
      renderStatus(await getJSON("/v1/claw/status"));
    } catch (e) {
      $("conn").textContent = "未连接 not connected";
      $("conn").className = "conn bad";
    }
    try {
      await pollEvents();
    } catch (e) { /* the timeline waits for the next tick */ }
    await Promise.all([...state.watch].map(pollSession));
    renderTimeline();
    setTimeout(tick, POLL_MS);
  }

  // ------------------------------------------------------------------ wiring
  function init() {
    if (!restore()) startSession();
    $("composer").addEventListener("submit", (e) => { e.preventDefault(); send(false); });
    $("end-session").addEventListener("click", () => send(true));
    $("new-session").addEventListener("click", () => {
      if (state.busy) return;
      if (state.session.messages.length) startSession();
    });
    $("prompt").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        send(false);
      }
    });
    setupTooltip();
    tick();
  }

  // what the test (and a curious reader in the console) can look at
  window.clawPage = { state };
  init();
})();
