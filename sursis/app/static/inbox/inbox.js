// The operator inbox: lists the workspace's pending calls live and decides them through the /v1 API.
// The key lives in this tab's session storage and only ever travels in the Authorization header.
// A person signed in with the identity provider has no key: the session cookie (HttpOnly, never
// read here) goes with each request and every change carries the session's CSRF token.
"use strict";

(() => {
  const KEY_STORAGE = "sursis.inbox.key";
  const SESSION = "session";
  const DECISION_ACTIONS = [
    "pending.approved",
    "pending.denied",
    "pending.revision_requested",
    "pending.answered",
    "pending.expired",
    "pending.cancelled",
    "pending.auto_approved",
  ];
  const ACTION_LABELS = {
    "pending.approved": "Approved",
    "pending.denied": "Denied",
    "pending.revision_requested": "Revision asked",
    "pending.answered": "Answered",
    "pending.expired": "Expired",
    "pending.cancelled": "Cancelled",
    "pending.auto_approved": "Pre-approved",
  };
  const STATUS_WORDS = {
    approved: "approved",
    denied: "denied",
    revision_requested: "sent back for a revision",
    answered: "answered",
    expired: "expired",
    cancelled: "cancelled",
  };
  const KIND_LABELS = { approval: "approval", elicitation: "question", client_exec: "client execution" };
  const SETTLED = new Set(["suspended", "completed", "failed", "cancelled"]);
  const MAX_LISTED = 1000;

  const $ = (id) => document.getElementById(id);

  const state = {
    key: null,
    csrf: null,
    me: null,
    calls: new Map(),
    gone: new Set(),
    seq: 0,
    decidedHere: new Set(),
    tools: new Set(),
    stream: null,
    openId: null,
    openCall: null,
    watch: 0,
    decisionsTimer: null,
    ticker: null,
    retryTimer: null,
    retryDelay: 0,
  };

  class ApiError extends Error {
    constructor(status, problem) {
      super((problem && (problem.detail || problem.title)) || `the service answered ${status}`);
      this.status = status;
      this.problem = problem || {};
    }
  }

  // The key itself was turned away (unknown, revoked, or not allowed to decide): signing in again
  // with it cannot help. Anything else (no answer, a 5xx) may pass, so a saved key is kept.
  class KeyRefused extends Error {}

  const RETRY_FIRST_MS = 5000;
  const RETRY_MAX_MS = 60000;

  // ---- building and formatting the page -----------------------------------------------------

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "className") node.className = value;
      else if (name === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function setText(id, text) {
    const node = $(id);
    node.textContent = text || "";
    return node;
  }

  function pretty(value) {
    if (typeof value === "string") {
      try {
        return JSON.stringify(JSON.parse(value), null, 2);
      } catch {
        return value;
      }
    }
    return JSON.stringify(value, null, 2);
  }

  function short(value, limit = 80) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
  }

  function summary(args) {
    if (!args || typeof args !== "object") return "";
    return Object.entries(args)
      .map(([name, value]) => `${name}: ${short(value, 60)}`)
      .join(" · ");
  }

  function span(seconds) {
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return `${s} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min`;
    const hours = Math.floor(m / 60);
    if (hours < 48) return m % 60 ? `${hours} h ${m % 60} min` : `${hours} h`;
    return `${Math.floor(hours / 24)} days`;
  }

  function ago(iso) {
    const seconds = (Date.now() - Date.parse(iso)) / 1000;
    return seconds < 5 ? "just now" : `${span(seconds)} ago`;
  }

  function left(iso) {
    const seconds = (Date.parse(iso) - Date.now()) / 1000;
    return seconds <= 0 ? "expired" : `expires in ${span(seconds)}`;
  }

  function clock(iso) {
    return new Date(iso).toLocaleString([], { dateStyle: "medium", timeStyle: "medium" });
  }

  function timeNode(iso, kind) {
    const text = kind === "left" ? left(iso) : ago(iso);
    return h("time", { datetime: iso, title: clock(iso), dataset: { tick: kind } }, text);
  }

  function tick() {
    for (const node of document.querySelectorAll("time[data-tick]")) {
      const iso = node.getAttribute("datetime");
      node.textContent = node.dataset.tick === "left" ? left(iso) : ago(iso);
      if (node.dataset.tick === "left") node.classList.toggle("late", Date.parse(iso) <= Date.now());
    }
  }

  function actorName(actor, name) {
    if (name) return name;
    if (!actor) return "someone else";
    if (actor === "system:sweeper") return "nobody in time";
    if (actor.startsWith("authorization:")) return "a pre-approval";
    if (actor.startsWith("reviewer:")) return `the reviewer model ${actor.slice(9)}`;
    return actor;
  }

  // ---- the API ---------------------------------------------------------------------------------

  // Who the request is from: the key, or the signed-in person's cookie (and CSRF token on changes).
  function credentialsFor(method, headers) {
    if (!state.csrf) {
      headers.Authorization = `Bearer ${state.key}`;
      return "omit";
    }
    if (method !== "GET" && method !== "HEAD") headers["X-CSRF-Token"] = state.csrf;
    return "same-origin";
  }

  async function api(path, { method = "GET", body } = {}) {
    const headers = { Accept: "application/json" };
    const credentials = credentialsFor(method, headers);
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials,
    });
    const text = await response.text();
    let payload = null;
    if (text) {
      try {
        payload = JSON.parse(text);
      } catch {
        payload = { detail: text.slice(0, 200) };
      }
    }
    if (!response.ok) {
      const error = new ApiError(response.status, payload);
      if (response.status === 401 && state.me) signOut("The key was refused (revoked?). Sign in again.");
      throw error;
    }
    return payload;
  }

  function problemText(error) {
    if (!(error instanceof ApiError)) return `The service could not be reached (${error.message}).`;
    const p = error.problem;
    const fields = (p.errors || []).map((e) => `${(e.loc || []).join(".")}: ${e.msg}`);
    return [`${p.detail || `The service answered ${error.status}.`}`, ...fields].join(" — ");
  }

  // ---- signing in and out ----------------------------------------------------------------------

  // Throws KeyRefused when the key is no good, and the ApiError or network error otherwise.
  async function signIn(key) {
    state.key = key;
    let me;
    try {
      me = await api("/v1/me");
    } catch (error) {
      state.key = null;
      if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
        throw new KeyRefused("This key was not accepted.");
      }
      throw error;
    }
    if (!me.permissions.includes("approve")) {
      state.key = null;
      throw new KeyRefused(`This is a ${me.role} key; the inbox needs an operator or admin key.`);
    }
    state.me = me;
    if (key !== SESSION) sessionStorage.setItem(KEY_STORAGE, key);
    start();
  }

  function signInError(error) {
    return error instanceof KeyRefused ? error.message : problemText(error);
  }

  // Signing in again with the key this tab saved (a reload). Only a refused key is forgotten;
  // while the service is unreachable or failing the page says so, keeps the key and tries again.
  async function resume(key) {
    clearTimeout(state.retryTimer);
    const button = $("retry");
    button.disabled = true;
    let failure = null;
    try {
      await signIn(key);
    } catch (error) {
      failure = error;
    }
    button.disabled = false;
    if (failure === null) {
      $("unreachable").hidden = true;
      state.retryDelay = 0;
    } else if (failure instanceof KeyRefused) {
      signOut(failure.message);
    } else {
      showUnreachable(key, failure);
    }
  }

  function showUnreachable(key, error) {
    const box = $("unreachable");
    $("sign-in").hidden = true;
    if (box.hidden) {
      box.hidden = false;
      $("retry").focus();
    }
    state.retryDelay = state.retryDelay ? Math.min(state.retryDelay * 2, RETRY_MAX_MS) : RETRY_FIRST_MS;
    setText("unreachable-error", signInError(error));
    const next = span(state.retryDelay / 1000);
    setText("unreachable-next", `The saved key stays in this tab. Next try in ${next}.`);
    state.retryTimer = setTimeout(() => resume(key), state.retryDelay);
  }

  function signOut(message) {
    if (state.stream) state.stream.abort();
    clearInterval(state.ticker);
    clearTimeout(state.decisionsTimer);
    clearTimeout(state.retryTimer);
    sessionStorage.removeItem(KEY_STORAGE);
    if (state.csrf) {
      const headers = { "X-CSRF-Token": state.csrf };
      fetch("/auth/oidc/logout", { method: "POST", headers, credentials: "same-origin", keepalive: true }).catch(() => {});
    }
    Object.assign(state, {
      key: null,
      csrf: null,
      me: null,
      stream: null,
      openId: null,
      openCall: null,
      watch: state.watch + 1,
      retryTimer: null,
      retryDelay: 0,
    });
    state.calls.clear();
    state.gone.clear();
    state.decidedHere.clear();
    state.tools.clear();
    $("pending-list").replaceChildren();
    $("decisions").replaceChildren();
    $("inbox").hidden = true;
    $("who").hidden = true;
    $("sign-out").hidden = true;
    $("unreachable").hidden = true;
    $("sign-in").hidden = false;
    $("key").value = "";
    setText("key-error", message || "");
    if (location.hash) history.replaceState(null, "", location.pathname);
    $("key").focus();
  }

  function start() {
    const me = state.me;
    $("sign-in").hidden = true;
    $("inbox").hidden = false;
    $("sign-out").hidden = false;
    const who = $("who");
    who.hidden = false;
    const where = me.workspace && me.role !== "admin" ? `workspace ${me.workspace}` : "all workspaces";
    who.textContent = `${me.name || me.id} · ${me.role} · ${where}`;
    setText("key-error", "");
    state.ticker = setInterval(tick, 10000);
    refreshList();
    connect();
    refreshDecisions();
    route();
  }

  // ---- the live list ---------------------------------------------------------------------------

  function setLive(mode, text) {
    const node = $("live");
    node.dataset.state = mode;
    node.textContent = text;
  }

  async function connect() {
    let delay = 1000;
    while (state.key) {
      const controller = new AbortController();
      state.stream = controller;
      try {
        const headers = { Accept: "text/event-stream" };
        const credentials = credentialsFor("GET", headers);
        const response = await fetch("/v1/pending/events", {
          headers,
          cache: "no-store",
          credentials,
          signal: controller.signal,
        });
        if (response.status === 401) {
          signOut("The key was refused (revoked?). Sign in again.");
          return;
        }
        if (!response.ok || !response.body) throw new Error(`the stream answered ${response.status}`);
        await readEvents(response.body, {
          comment: (text) => {
            if (text === "connected") {
              delay = 1000;
              setLive("live", "Live");
              refreshList();
            }
          },
          event: applyEvent,
        });
      } catch (error) {
        if (controller.signal.aborted) return;
      }
      if (state.stream !== controller || !state.key) return;
      setLive("down", "Reconnecting…");
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 15000);
    }
  }

  // Server-sent events over fetch (EventSource cannot send an Authorization header).
  async function readEvents(body, on) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = /\r\n\r\n|\n\n|\r\r/.exec(buffer))) {
        const block = buffer.slice(0, end.index);
        buffer = buffer.slice(end.index + end[0].length);
        dispatch(block, on);
      }
    }
  }

  function dispatch(block, on) {
    let type = "message";
    const data = [];
    for (const line of block.split(/\r\n|\n|\r/)) {
      if (line.startsWith(":")) {
        on.comment(line.slice(1).trim());
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") type = value;
      else if (field === "data") data.push(value);
    }
    if (data.length) {
      try {
        on.event(type, JSON.parse(data.join("\n")));
      } catch (error) {
        console.warn("unreadable event", error);
      }
    }
  }

  function applyEvent(type, envelope) {
    const d = envelope.data || {};
    if (type === "pending.created") {
      if (state.gone.has(d.correlation_id)) return;
      remember({
        seq: ++state.seq,
        correlation_id: d.correlation_id,
        conversation_id: envelope.conversation_id,
        run_id: d.run_id,
        workspace: envelope.workspace,
        tool_name: d.tool_name,
        agent: d.agent,
        agent_path: d.agent_path,
        kind: d.kind,
        category: d.category,
        args_summary: d.args_summary,
        effect_description: d.effect_description,
        created_at: envelope.created_at,
        expires_at: d.expires_at,
      });
      renderList();
    } else if (type === "pending.vote" || type === "pending.escalated" || type === "pending.reminded") {
      refreshCall(d.correlation_id);
    } else if (type === "pending.resolved") {
      state.gone.add(d.correlation_id);
      state.calls.delete(d.correlation_id);
      renderList();
      if (state.openId === d.correlation_id && !state.decidedHere.has(d.correlation_id)) {
        showDecidedElsewhere(d.correlation_id);
      }
      refreshDecisionsSoon();
    }
  }

  // A vote or an escalation changed who may decide and what is still needed: read the call again.
  async function refreshCall(id) {
    if (!id || state.gone.has(id)) return;
    let call;
    try {
      call = await api(`/v1/pending/${id}`);
    } catch (error) {
      return;
    }
    if (call.status !== "awaiting" || state.gone.has(id)) return;
    const known = state.calls.get(id);
    remember({ ...(known || {}), ...call, seq: known ? known.seq : ++state.seq });
    renderList();
    if (state.openId === id && state.openCall && !state.decidedHere.has(id)) {
      state.openCall = call;
      renderCall(call);
    }
  }

  const REVIEW_WORDS = {
    yes: "risky",
    no: "not risky",
    unsure: "unsure",
    error: "failed",
    timeout: "timed out",
    over_budget: "over budget",
    interrupted: "interrupted",
    skipped: "not asked (decided first)",
    queued: "thinking…",
    reviewing: "thinking…",
  };
  const REVIEW_EFFECTS = {
    approved: "approved it",
    voted: "cast one vote",
    stale: "a person decided first",
    left_to_people: "left to people",
  };

  function reviewText(review) {
    const verdict = REVIEW_WORDS[review.verdict] || review.verdict;
    const effect = review.effect ? ` · ${REVIEW_EFFECTS[review.effect] || review.effect}` : "";
    const reason = review.reason ? ` — ${review.reason}` : "";
    return `${review.model} asked “${review.question}”: ${verdict}${effect}${reason} (policy v${review.policy_version ?? "–"})`;
  }

  function approvalsText(call) {
    const approvals = call.quorum - call.still_needed;
    return `${approvals} of ${call.quorum} approvals · ${call.still_needed} still needed`;
  }

  function voteText(vote) {
    const by = actorName(vote.cast_by, vote.cast_by_name);
    const forWhom = vote.on_behalf_of ? ` for ${actorName(vote.approver, vote.approver_name)}` : "";
    const reason = vote.reason ? `: “${vote.reason}”` : "";
    return `${vote.decision} by ${by}${forWhom} at ${clock(vote.at)}${reason}`;
  }

  function remember(call) {
    state.calls.set(call.correlation_id, call);
    if (call.tool_name && !state.tools.has(call.tool_name)) {
      state.tools.add(call.tool_name);
      $("tool-names").replaceChildren(...[...state.tools].sort().map((name) => h("option", { value: name })));
    }
  }

  // The list is the truth; calls announced on the stream while it was being read are kept.
  async function refreshList() {
    const since = state.seq;
    try {
      const found = [];
      let cursor = null;
      do {
        const params = new URLSearchParams({ status: "awaiting", limit: "200" });
        if (cursor) params.set("cursor", cursor);
        const page = await api(`/v1/pending?${params}`);
        found.push(...page.items);
        cursor = page.next_cursor;
      } while (cursor && found.length < MAX_LISTED);
      const announced = [...state.calls.values()].filter((call) => call.seq > since);
      state.calls.clear();
      for (const call of [...found, ...announced]) if (!state.gone.has(call.correlation_id)) remember(call);
      setText("list-error", "");
    } catch (error) {
      setText("list-error", `The pending calls could not be loaded: ${problemText(error)}`);
    }
    renderList();
  }

  function filtered() {
    const kind = $("filter-kind").value;
    const tool = $("filter-tool").value.trim().toLowerCase();
    return [...state.calls.values()]
      .filter((c) => (!kind || c.kind === kind) && (!tool || c.tool_name.toLowerCase().includes(tool)))
      .sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
  }

  function renderList() {
    const list = $("pending-list");
    const focused = document.activeElement && document.activeElement.closest(".call-link");
    const focusedId = focused ? focused.dataset.id : null;
    const shown = filtered();
    const admin = state.me && state.me.role === "admin";
    list.replaceChildren(
      ...shown.map((c) =>
        h(
          "li",
          { className: "call" },
          h(
            "a",
            {
              className: "call-link",
              href: `#call=${c.correlation_id}`,
              "aria-current": c.correlation_id === state.openId ? "true" : null,
              dataset: { id: c.correlation_id },
            },
            h(
              "span",
              { className: "call-title" },
              h("strong", { className: "tool" }, c.tool_name),
              h("span", { className: `badge kind-${c.kind}` }, KIND_LABELS[c.kind] || c.kind),
              c.category
                ? h("span", { className: `badge category category-${c.category}`, title: "tool category" }, c.category)
                : null,
              c.quorum != null
                ? h(
                    "span",
                    { className: "badge votes", title: "approvals of the quorum" },
                    `${c.quorum - c.still_needed}/${c.quorum}`,
                  )
                : null,
              c.escalation_level
                ? h("span", { className: "badge escalated", title: "escalation level" }, `escalated ${c.escalation_level}`)
                : null,
              c.review
                ? h(
                    "span",
                    { className: `badge review review-${c.review.verdict}`, title: "the reviewer model's verdict" },
                    `reviewer: ${REVIEW_WORDS[c.review.verdict] || c.review.verdict}`,
                  )
                : null,
            ),
            h("span", { className: "call-effect" }, c.effect_description),
            h(
              "span",
              { className: "call-meta" },
              `agent ${c.agent_path || c.agent}`,
              admin && c.workspace ? ` · workspace ${c.workspace}` : "",
            ),
            h("span", { className: "call-args" }, summary(c.args_summary)),
            h(
              "span",
              { className: "call-times" },
              timeNode(c.created_at, "ago"),
              " · ",
              timeNode(c.expires_at, "left"),
            ),
          ),
        ),
      ),
    );
    tick();
    const total = state.calls.size;
    setText("pending-count", shown.length === total ? `(${total})` : `(${shown.length} of ${total})`);
    $("list-empty").hidden = shown.length > 0;
    $("list-empty").textContent = total
      ? "No pending call matches the filters."
      : "Nothing is waiting for a decision.";
    if (focusedId) {
      const again = list.querySelector(`[data-id="${CSS.escape(focusedId)}"]`);
      if (again) again.focus();
    }
  }

  // ---- one call --------------------------------------------------------------------------------

  function route() {
    const match = /^#call=([0-9a-fA-F-]{36})$/.exec(location.hash);
    if (match) openCall(match[1].toLowerCase());
    else closeCall();
  }

  function closeCall() {
    const was = state.openId;
    state.openId = null;
    state.openCall = null;
    state.watch += 1;
    $("detail").hidden = true;
    renderList();
    if (was) {
      const link = $("pending-list").querySelector(`[data-id="${CSS.escape(was)}"]`);
      (link || $("pending-title")).focus();
    }
  }

  async function openCall(id) {
    state.openId = id;
    state.openCall = null;
    state.watch += 1;
    const detail = $("detail");
    detail.hidden = false;
    setText("detail-title", "Loading…");
    for (const field of ["detail-effect", "detail-args", "decide-error", "conversation-error"]) {
      setText(field, "");
    }
    $("detail-meta").replaceChildren();
    $("conversation").replaceChildren();
    clearState();
    resetForms();
    $("decide").hidden = true;
    renderList();
    let call;
    try {
      call = await api(`/v1/pending/${id}`);
    } catch (error) {
      if (state.openId !== id) return;
      setText("detail-title", "Pending call");
      const missing = "This pending call does not exist (or not in your workspace).";
      showState("error", error.status === 404 ? missing : problemText(error));
      return;
    }
    if (state.openId !== id) return;
    state.openCall = call;
    renderCall(call);
    $("detail-title").focus();
    loadConversation(call);
    if (call.status !== "awaiting") showDecidedElsewhere(id, call);
  }

  function renderCall(call) {
    setText("detail-title", call.tool_name);
    setText("detail-effect", call.effect_description);
    const rows = [
      ["Kind", KIND_LABELS[call.kind] || call.kind],
      ["Category", call.category || "not recorded"],
      ["Agent", call.agent_path || call.agent],
      ["Status", STATUS_WORDS[call.status] || call.status],
      ["Requested", h("span", {}, timeNode(call.created_at, "ago"), ` · ${clock(call.created_at)}`)],
      ["Deadline", h("span", {}, timeNode(call.expires_at, "left"), ` · ${clock(call.expires_at)}`)],
      ...(call.quorum != null
        ? [
            ["Approvals", h("span", { id: "detail-approvals" }, approvalsText(call))],
            ["Approvers", (call.approvers || []).join(", ") || "nobody yet"],
            ["Escalation", call.escalation_level ? `level ${call.escalation_level}` : "not escalated"],
            [
              "Votes",
              (call.votes || []).length
                ? h("ul", { id: "detail-votes", className: "votes" }, ...call.votes.map((v) => h("li", {}, voteText(v))))
                : "none yet",
            ],
          ]
        : []),
      ...(call.review ? [["Reviewer", h("span", { id: "detail-review" }, reviewText(call.review))]] : []),
      ["Conversation", h("code", {}, call.conversation_id)],
      ["Correlation id", h("code", {}, call.correlation_id)],
    ];
    $("detail-meta").replaceChildren(
      ...rows.flatMap(([name, value]) => [
        h("dt", {}, name),
        h("dd", { id: name === "Status" ? "detail-status" : null }, value),
      ]),
    );
    tick();
    const args = call.args || call.args_summary;
    // What will run (pydantic-ai's validated arguments), and the model's own when they differ.
    setText("detail-args", pretty(call.validated_args || args));
    const differ = Boolean(call.validated_args && call.args);
    $("model-args-title").hidden = !differ;
    setText("detail-model-args", differ ? pretty(call.args) : "").hidden = !differ;
    $("edit-args").value = pretty(args);
    const awaiting = call.status === "awaiting";
    // A call routed to approver groups: the buttons only for a key that may vote on it now.
    const notMine = call.can_decide === false;
    $("decide").hidden = !awaiting || notMine;
    if (awaiting && notMine) {
      // Read again after a vote (this page's or another's): say why the buttons are gone.
      const mine = (call.votes || []).some((v) => state.me && v.cast_by === state.me.id);
      if (mine) showState("done", `Your vote is counted: ${approvalsText(call)}.`);
      else showState("info", "You are not one of this call's approvers.");
    } else if (awaiting && $("detail-state").classList.contains("info")) {
      clearState(); // an escalation or a reassignment made this key an approver
    }
    $("approval-actions").hidden = call.kind !== "approval";
    $("answer-form").hidden = call.kind !== "elicitation";
    $("client-note").hidden = call.kind !== "client_exec";
    setBusy(false);
  }

  function resetForms() {
    for (const id of ["deny-reason", "revise-notes", "answer-text"]) $(id).value = "";
    $("edit-errors").replaceChildren();
    $("edit-args").removeAttribute("aria-invalid");
    for (const details of $("decide").querySelectorAll("details")) details.open = false;
  }

  function clearState() {
    const box = $("detail-state");
    box.hidden = true;
    box.className = "notice";
    box.replaceChildren();
  }

  function setStatus(status) {
    const node = $("detail-status");
    if (node) node.textContent = STATUS_WORDS[status] || status;
  }

  function showState(kind, ...content) {
    const box = $("detail-state");
    box.hidden = false;
    box.className = `notice ${kind}`;
    box.replaceChildren(...content.map((c) => (c instanceof Node ? c : h("p", {}, c))));
  }

  function setBusy(busy) {
    for (const button of $("decide").querySelectorAll("button")) button.disabled = busy;
  }

  async function decide(body, source) {
    const call = state.openCall;
    if (!call) return;
    setText("decide-error", "");
    $("edit-errors").replaceChildren();
    setBusy(true);
    // The stream may announce this decision before its response arrives: it is ours, not news.
    state.decidedHere.add(call.correlation_id);
    let decided;
    try {
      decided = await api(`/v1/pending/${call.correlation_id}/resolve`, { method: "POST", body });
    } catch (error) {
      state.decidedHere.delete(call.correlation_id);
      if (state.openCall !== call) return;
      setBusy(false);
      refuse(error, source);
      return;
    }
    if (decided.status === "awaiting") {
      // A vote that did not decide: the call still waits for others.
      state.decidedHere.delete(call.correlation_id);
      remember({ ...(state.calls.get(call.correlation_id) || {}), ...decided });
      renderList();
      if (state.openCall !== call) return;
      state.openCall = decided;
      renderCall(decided);
      showState("done", `Your vote is counted: ${approvalsText(decided)}.`);
      return;
    }
    state.gone.add(call.correlation_id);
    state.calls.delete(call.correlation_id);
    renderList();
    refreshDecisionsSoon();
    if (state.openCall !== call) return;
    $("decide").hidden = true;
    setStatus(decided.status);
    const edited = decided.edited_args ? " with edited arguments" : "";
    const revise = decided.status === "revision_requested";
    const what = revise
      ? "sent this call back for a revision"
      : `${STATUS_WORDS[decided.status] || decided.status} this call`;
    const reason = decided.reason ? ` ${revise ? "Notes" : "Reason"}: “${decided.reason}”.` : "";
    showState("done", `You ${what}${edited}.${reason}`);
    watchRun(call);
  }

  function refuse(error, source) {
    if (!(error instanceof ApiError)) {
      setText("decide-error", problemText(error));
      return;
    }
    const p = error.problem;
    if (error.status === 409 && p.code === "stale") {
      const who = actorName(p.resolved_by, p.resolved_by_name);
      const when = p.resolved_at ? ` at ${clock(p.resolved_at)}` : "";
      $("decide").hidden = true;
      setStatus(p.pending_status);
      const what = STATUS_WORDS[p.pending_status] || p.pending_status;
      showState("stale", `Already decided by ${who}: ${what}${when}.`);
      state.gone.add(state.openId);
      state.calls.delete(state.openId);
      renderList();
      refreshDecisionsSoon();
      return;
    }
    if (error.status === 409 && p.code === "args_changed") {
      setText(
        "decide-error",
        "The arguments changed since this page loaded them. Open the call again before deciding.",
      );
      return;
    }
    if (error.status === 403) {
      setText("decide-error", `This key may not decide this call: ${p.detail || "forbidden"}.`);
      return;
    }
    if (error.status === 422 && source === "edit") {
      const errors = p.errors || [];
      $("edit-args").setAttribute("aria-invalid", "true");
      $("edit-errors").replaceChildren(
        ...errors.map((e) => {
          const loc = (e.loc || []).slice((e.loc || [])[0] === "args" ? 1 : 0).join(".") || "arguments";
          return h("li", {}, h("strong", {}, loc), `: ${e.msg}`);
        }),
      );
      if (!errors.length) setText("decide-error", problemText(error));
      $("edit-args").focus();
      return;
    }
    setText("decide-error", problemText(error));
  }

  async function showDecidedElsewhere(id, known) {
    $("decide").hidden = true;
    let call = known;
    try {
      call = call || (await api(`/v1/pending/${id}`));
      const params = new URLSearchParams({ correlation_id: id, order: "desc", limit: "1" });
      for (const action of DECISION_ACTIONS) params.append("action", action);
      const [row] = (await api(`/v1/audit?${params}`)).items;
      if (state.openId !== id) return;
      const who = row ? actorName(row.actor, row.actor_name) : actorName(call.resolved_by, null);
      const when = call.resolved_at ? ` at ${clock(call.resolved_at)}` : "";
      const reason = call.reason ? ` Reason: “${call.reason}”.` : "";
      setStatus(call.status);
      const what = STATUS_WORDS[call.status] || call.status;
      showState("stale", `Already decided by ${who}: ${what}${when}.${reason}`);
    } catch (error) {
      if (state.openId === id) showState("stale", "This call was decided elsewhere.");
    }
  }

  async function watchRun(call) {
    const token = ++state.watch;
    const progress = h("p", {}, "The run is resuming…");
    const box = $("detail-state");
    box.append(progress);
    for (let attempt = 0; attempt < 30; attempt += 1) {
      let run;
      try {
        run = await api(`/v1/runs/${call.run_id}?wait=20`);
      } catch (error) {
        if (state.watch === token) {
          progress.textContent = `The run could not be followed: ${problemText(error)}`;
        }
        return;
      }
      if (state.watch !== token) return;
      if (SETTLED.has(run.status) && run.status !== "suspended") {
        progress.replaceChildren(`Run ${run.status}.`);
        if (run.output) box.append(h("blockquote", { className: "output" }, short(run.output, 600)));
        if (run.error) box.append(h("p", {}, `${run.error.code}: ${run.error.message}`));
        loadConversation(call);
        return;
      }
      if (run.status === "suspended") {
        const count = run.pending.length;
        progress.textContent = count
          ? `The run waits for ${count} more decision${count === 1 ? "" : "s"}; see the list.`
          : "The run is suspended.";
        loadConversation(call);
        return;
      }
      progress.textContent = `The run is ${run.status}…`;
    }
  }

  // ---- the conversation so far -------------------------------------------------------------------

  async function loadConversation(call) {
    let conversation;
    try {
      conversation = await api(`/v1/conversations/${call.conversation_id}`);
    } catch (error) {
      if (state.openCall === call) {
        setText("conversation-error", `The conversation could not be loaded: ${problemText(error)}`);
      }
      return;
    }
    if (state.openCall !== call) return;
    setText("conversation-error", "");
    const items = [];
    if (conversation.forked_from) items.push(forkNotice(conversation.forked_from));
    for (const message of conversation.messages) {
      for (const part of message.message.parts || []) {
        const item = renderPart(part, call, message.channel);
        if (item) items.push(item);
      }
    }
    $("conversation").replaceChildren(...items);
  }

  // A fork starts with copies of the original's messages before the fork point.
  function forkNotice(origin) {
    return h(
      "li",
      { className: "turn turn-fork" },
      h("p", { className: "who" }, "Forked from"),
      h(
        "p",
        { className: "text" },
        "conversation ",
        h("code", {}, origin.conversation_id),
        ` at message ${origin.seq}: the messages before it are copies of that conversation's.`,
      ),
    );
  }

  function textOf(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map((c) => (typeof c === "string" ? c : pretty(c))).join("\n");
    return pretty(content);
  }

  function renderPart(part, call, channel) {
    const current = part.tool_call_id && part.tool_call_id === call.tool_call_id;
    // Where the turn came from (web, slack, email, system), as the API records it.
    const via = channel ? h("span", { className: "channel" }, ` · ${channel}`) : "";
    const item = (kind, label, body) =>
      h(
        "li",
        { className: `turn turn-${kind}${current ? " current" : ""}`, dataset: { channel: channel || "" } },
        h("p", { className: "who" }, label, via),
        body,
      );
    switch (part.part_kind) {
      case "user-prompt":
        return item("user", "User", h("p", { className: "text" }, textOf(part.content)));
      case "text":
        return item("agent", "Agent", h("p", { className: "text" }, textOf(part.content)));
      case "tool-call":
      case "builtin-tool-call":
        return item(
          "call",
          `Tool call: ${part.tool_name}${current ? " (this decision)" : ""}`,
          h("pre", { className: "code" }, pretty(part.args)),
        );
      case "tool-return":
      case "builtin-tool-return": {
        const text = pretty(part.content);
        const body =
          text.length > 400
            ? h(
                "details",
                {},
                h("summary", {}, short(text.replace(/\s+/g, " "), 120)),
                h("pre", { className: "code" }, text),
              )
            : h("pre", { className: "code" }, text);
        return item("result", `Result of ${part.tool_name}`, body);
      }
      case "retry-prompt":
        return item(
          "result",
          `Retry${part.tool_name ? ` of ${part.tool_name}` : ""}`,
          h("pre", { className: "code" }, pretty(part.content)),
        );
      default:
        return null;
    }
  }

  // ---- recent decisions --------------------------------------------------------------------------

  function refreshDecisionsSoon() {
    clearTimeout(state.decisionsTimer);
    state.decisionsTimer = setTimeout(refreshDecisions, 250);
  }

  async function refreshDecisions() {
    const params = new URLSearchParams({ order: "desc", limit: "20" });
    for (const action of DECISION_ACTIONS) params.append("action", action);
    let page;
    try {
      page = await api(`/v1/audit?${params}`);
    } catch (error) {
      if (state.key) setText("decisions-error", `Recent decisions could not be loaded: ${problemText(error)}`);
      return;
    }
    if (!state.key) return;
    setText("decisions-error", "");
    $("decisions-empty").hidden = page.items.length > 0;
    $("decisions").replaceChildren(
      ...page.items.map((row) => {
        const details = row.details || {};
        const verb = ACTION_LABELS[row.action] || row.action;
        return h(
          "li",
          { className: "decision" },
          h("span", { className: `verb verb-${row.action.replace("pending.", "")}` }, verb),
          " ",
          h("strong", {}, details.tool_name || "call"),
          " by ",
          h("span", { className: "actor" }, actorName(row.actor, row.actor_name)),
          " ",
          h("time", { datetime: row.at, title: clock(row.at), dataset: { tick: "ago" } }, ago(row.at)),
          details.reason ? h("span", { className: "reason" }, `“${short(details.reason, 140)}”`) : null,
          details.edited_args ? h("span", { className: "reason" }, "with edited arguments") : null,
          row.correlation_id
            ? h("a", { href: `#call=${row.correlation_id}`, className: "more" }, "details")
            : null,
        );
      }),
    );
  }

  // ---- wiring ------------------------------------------------------------------------------------

  function editedArgs() {
    const box = $("edit-args");
    const errors = $("edit-errors");
    let value;
    try {
      value = JSON.parse(box.value);
    } catch (error) {
      box.setAttribute("aria-invalid", "true");
      errors.replaceChildren(h("li", {}, `Not valid JSON: ${error.message}`));
      return null;
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      box.setAttribute("aria-invalid", "true");
      errors.replaceChildren(h("li", {}, "The arguments must be a JSON object, e.g. {\"name\": \"value\"}."));
      return null;
    }
    box.removeAttribute("aria-invalid");
    errors.replaceChildren();
    return value;
  }

  function submitted(id, handler) {
    $(id).addEventListener("submit", (event) => {
      event.preventDefault();
      handler(event.currentTarget);
    });
  }

  function wire() {
    submitted("sign-in-form", async (form) => {
      const key = $("key").value.trim();
      if (!key) {
        setText("key-error", "Paste a key first.");
        $("key").focus();
        return;
      }
      const button = form.querySelector("button");
      button.disabled = true;
      setText("key-error", "");
      try {
        await signIn(key);
        $("key").value = "";
      } catch (error) {
        setText("key-error", signInError(error));
        $("key").focus();
      } finally {
        button.disabled = false;
      }
    });
    $("sign-out").addEventListener("click", () => signOut("Signed out."));
    $("retry").addEventListener("click", () => {
      const saved = sessionStorage.getItem(KEY_STORAGE);
      if (saved) resume(saved);
      else signOut("");
    });
    $("other-key").addEventListener("click", () => signOut("Signed out."));
    submitted("filters", () => renderList());
    $("filter-kind").addEventListener("change", renderList);
    $("filter-tool").addEventListener("input", renderList);
    window.addEventListener("hashchange", () => state.me && route());
    $("detail-close").addEventListener("click", (event) => {
      event.preventDefault();
      history.pushState(null, "", location.pathname);
      closeCall();
    });
    $("detail").addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !event.target.closest("textarea, input, select")) $("detail-close").click();
    });

    const hash = () => (state.openCall ? { args_hash: state.openCall.args_hash } : {});
    submitted("approve-form", () => decide({ decision: "approve", ...hash() }, "approve"));
    submitted("deny-form", (form) => {
      if (!form.reportValidity()) return;
      decide({ decision: "deny", reason: $("deny-reason").value.trim(), ...hash() }, "deny");
    });
    submitted("revise-form", (form) => {
      if (!form.reportValidity()) return;
      decide({ decision: "revise", reason: $("revise-notes").value.trim(), ...hash() }, "revise");
    });
    submitted("edit-form", () => {
      const args = editedArgs();
      if (args === null) {
        $("edit-args").focus();
        return;
      }
      decide({ decision: "approve", args, ...hash() }, "edit");
    });
    $("edit-args").addEventListener("input", editedArgs);
    submitted("answer-form", (form) => {
      if (!form.reportValidity()) return;
      decide({ decision: "answer", result: $("answer-text").value }, "answer");
    });
  }

  // A person signed in with the identity provider: their session, if the service has sign-in on.
  async function resumeSession() {
    let response;
    try {
      response = await fetch("/auth/oidc/session", { cache: "no-store", credentials: "same-origin" });
    } catch {
      return false;
    }
    $("sso").hidden = response.status === 404;
    if (!response.ok) return false;
    state.csrf = (await response.json()).csrf_token;
    try {
      await signIn(SESSION);
    } catch (error) {
      state.csrf = null;
      setText("key-error", signInError(error));
      return false;
    }
    return true;
  }

  wire();
  const saved = sessionStorage.getItem(KEY_STORAGE);
  if (saved) {
    resume(saved);
  } else {
    resumeSession().then((signedIn) => {
      if (!signedIn) $("key").focus();
    });
  }
})();
