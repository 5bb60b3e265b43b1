// The a2rag curation page. Every string from the knowledge base is untrusted (chunk text is
// whatever was ingested): it reaches the DOM only as text nodes, never as markup, so a
// document containing <script> shows as text.
"use strict";

const state = { csrf: null, kb: "default", may: [], reviewer: localStorage.getItem("a2rag.reviewer") || "" };
const $ = (id) => document.getElementById(id);

// Builds an element; string and number children become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, String(v));
  }
  append(node, children);
  return node;
}

function toast(message) {
  const t = $("toast");
  t.textContent = message;
  t.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove("show"), 2500);
}

class Unauthorized extends Error {}

async function api(path, options = {}) {
  const headers = { Accept: "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
  const response = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    credentials: "same-origin",
  });
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) throw new Unauthorized(data.error || "sign in");
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

const withKb = (path, params = {}) => {
  const query = new URLSearchParams({ kb: state.kb });
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") query.set(k, v);
  return `${path}?${query}`;
};

// ---- pages ---------------------------------------------------------------------------------

const pages = { review: reviewPage, audit: auditPage, entity: entityPage, ask: askPage, status: statusPage };
let keyHandler = null;

function route() {
  const [name, query] = location.hash.replace(/^#\/?/, "").split("?");
  // Pages the token's scope cannot use are not offered (the server refuses them anyway).
  const allowed = (p) => { const link = document.querySelector(`nav a[data-page="${p}"]`); return !link || !link.dataset.scope || state.may.includes(link.dataset.scope); };
  const fallback = allowed("review") ? "review" : "ask";
  const page = pages[name] && allowed(name) ? name : fallback;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.page === page);
    a.hidden = !allowed(a.dataset.page);
  }
  keyHandler = null;
  const root = $("page");
  root.replaceChildren();
  pages[page](root, new URLSearchParams(query || "")).catch((e) => fail(root, e));
}

function fail(root, e) {
  if (e instanceof Unauthorized) return showLogin();
  root.append(el("p", { class: "error" }, e.message));
}

function triple(t) {
  if (!t) return "";
  return el("span", { class: "triple" }, el("b", {}, t.subject), el("span", { class: "rel" }, t.relation), el("b", {}, t.object));
}

// Review queue: j/k move, a approve, r reject, e edit (Enter saves, Escape cancels).
async function reviewPage(root) {
  const { proposals } = await api(withKb("/api/proposals"));
  root.append(
    el("h1", {}, `Review queue (${proposals.length} pending)`),
    el("p", { class: "hint" }, el("kbd", {}, "j"), " / ", el("kbd", {}, "k"), " move, ", el("kbd", {}, "a"), " approve, ",
      el("kbd", {}, "r"), " reject, ", el("kbd", {}, "e"), " edit (", el("kbd", {}, "Enter"), " saves, ", el("kbd", {}, "Esc"), " cancels)"),
  );
  const list = el("div", { id: "queue" });
  root.append(list);
  if (proposals.length === 0) list.append(el("p", { class: "hint" }, "Nothing to review. Ask a question: verified answers propose the facts they cite."));
  let selected = 0;
  const cards = proposals.map((p) => reviewCard(p));
  list.append(...cards.map((c) => c.node));
  const select = (i) => {
    if (cards.length === 0) return;
    selected = Math.max(0, Math.min(i, cards.length - 1));
    cards.forEach((c, j) => { c.node.classList.toggle("selected", j === selected); c.node.setAttribute("aria-selected", j === selected); });
    cards[selected].node.focus({ preventScroll: true });
    cards[selected].node.scrollIntoView({ block: "nearest" });
  };
  const decided = (card) => {
    const i = cards.indexOf(card);
    cards.splice(i, 1);
    card.node.remove();
    root.querySelector("h1").textContent = `Review queue (${cards.length} pending)`;
    select(i);
  };
  for (const c of cards) {
    c.onDecided = () => decided(c);
    c.node.addEventListener("click", () => select(cards.indexOf(c)));
  }
  select(0);
  keyHandler = (event) => {
    const card = cards[selected];
    if (!card || card.editing) return false;
    switch (event.key) {
      case "j": select(selected + 1); return true;
      case "k": select(selected - 1); return true;
      case "a": card.decide("approve"); return true;
      case "r": card.decide("reject"); return true;
      case "e": card.edit(); return true;
      default: return false;
    }
  };
}

function reviewCard(p) {
  const card = { editing: false, onDecided: () => {} };
  const status = el("span", { class: "meta" });
  const decide = async (action, tripleBody) => {
    const who = reviewer();
    if (!who) return;
    try {
      const body = { who };
      if (tripleBody) body.triple = tripleBody;
      await api(withKb(`/api/proposals/${p.id}/${action}`), { method: "POST", body });
      toast(`${action === "edit" ? "edited and approved" : action + "d"}: proposal ${p.id}`);
      card.onDecided();
    } catch (e) {
      if (e instanceof Unauthorized) return showLogin();
      status.textContent = e.message;
      status.classList.add("error");
    }
  };
  const editForm = () => {
    const fields = ["subject", "relation", "object"].map((f) => {
      const input = el("input", { value: p.triple[f], "aria-label": f, name: f });
      if (f !== "relation") suggestInto(input);
      return input;
    });
    const form = el("form", { class: "edit" }, ...fields, el("button", { type: "submit" }, "Save"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const [subject, relation, object] = fields.map((i) => i.value.trim());
      decide("edit", { subject, relation, object });
    });
    form.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { event.preventDefault(); closeEdit(); }
    });
    return { form, first: fields[0] };
  };
  let editing = null;
  const closeEdit = () => { editing?.form.remove(); editing = null; card.editing = false; card.node.focus(); };
  card.edit = () => {
    if (editing) return;
    editing = editForm();
    card.editing = true;
    card.node.append(editing.form);
    editing.first.focus();
    editing.first.select();
  };
  card.decide = (action) => decide(action);
  card.node = el("article", { class: "card proposal", tabindex: "-1", "data-id": p.id },
    triple(p.triple),
    el("div", { class: "meta" }, "Question: ", el("q", {}, p.question), p.answer ? [" — answer: ", el("b", {}, p.answer)] : null),
    el("div", { class: "meta" }, `${p.title || p.doc_id} · chunk ${p.chunk}`),
    el("div", { class: "source" }, p.before, el("mark", {}, p.highlight), p.after),
    el("div", { class: "actions" },
      el("button", { class: "approve", type: "button", onclick: () => decide("approve") }, "Approve (a)"),
      el("button", { class: "reject", type: "button", onclick: () => decide("reject") }, "Reject (r)"),
      el("button", { type: "button", onclick: () => card.edit() }, "Edit (e)"),
      status),
  );
  return card;
}

function reviewer() {
  const who = $("reviewer").value.trim();
  if (!who) {
    toast("Enter your name as reviewer first");
    $("reviewer").focus();
  }
  return who;
}

// Entity suggestions from the alias matcher, as the input's datalist.
let listCount = 0;
function suggestInto(input) {
  const list = el("datalist", { id: `suggest-${++listCount}` });
  input.setAttribute("list", list.id);
  let timer;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const q = input.value.trim();
      if (q.length < 2) return;
      try {
        const { entities } = await api(withKb("/api/entities", { q, limit: 8 }));
        list.replaceChildren(...entities.map((s) => el("option", { value: s.name }, `${s.alias} · ${s.mentions} chunks`)));
      } catch { /* suggestions are a convenience */ }
    }, 150);
  });
  queueMicrotask(() => input.parentNode && input.after(list));
}

async function auditPage(root, params) {
  const filters = { who: params.get("who") || "", token: params.get("token") || "", action: params.get("action") || "", text: params.get("text") || "" };
  const { entries } = await api(withKb("/api/audit", filters));
  const who = el("input", { name: "who", value: filters.who, size: 10 });
  const token = el("input", { name: "token", value: filters.token, size: 10 });
  const action = el("select", { name: "action" }, ...["", "approve", "reject", "edit", "ingest", "replace", "delete"].map((a) => el("option", { value: a, selected: a === filters.action }, a || "any action")));
  const text = el("input", { name: "text", value: filters.text, placeholder: "words in the triple or document" });
  const form = el("form", { class: "filters" },
    el("label", {}, "Who ", who), el("label", {}, "Token ", token), el("label", {}, "Action ", action), el("label", {}, "Text ", text),
    el("button", { type: "submit" }, "Filter"),
    el("a", { href: withKb("/api/audit.jsonl", filters), download: "a2rag-audit.jsonl" }, "Export JSONL"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/audit?${new URLSearchParams({ who: who.value, token: token.value, action: action.value, text: text.value })}`;
  });
  const rows = entries.map((e) => el("tr", {},
    el("td", {}, new Date(e.when_ms).toLocaleString()), el("td", {}, e.who), el("td", {}, e.token || ""), el("td", {}, e.action),
    el("td", {}, triple(e.triple)), el("td", {}, e.doc_id), el("td", {}, e.proposal == null ? "" : `#${e.proposal}`)));
  root.append(el("h1", {}, `Audit log (${entries.length})`), form,
    el("table", { id: "audit" }, el("thead", {}, el("tr", {}, ...["When", "Who", "Token", "Action", "Triple", "Document", "Proposal"].map((h) => el("th", {}, h)))), el("tbody", {}, ...rows)));
}

async function entityPage(root, params) {
  const input = el("input", { id: "entity-search", placeholder: "an entity's name", size: 40, value: params.get("name") || "" });
  const suggestions = el("ul", { class: "suggestions" });
  const form = el("form", { class: "filters" }, input, el("button", { type: "submit" }, "Show"));
  const view = el("div", { id: "entity-view" });
  root.append(el("h1", {}, "Entities"), form, suggestions, view);
  const open = (query) => { location.hash = `#/entity?${new URLSearchParams(query)}`; };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const q = input.value.trim();
    if (!q) return;
    const { entities } = await api(withKb("/api/entities", { q, limit: 12 })).catch((e) => fail(view, e) || { entities: [] });
    if (entities.length === 1 || (entities[0] && entities[0].alias.toLowerCase() === q.toLowerCase())) return open({ id: entities[0].id });
    suggestions.replaceChildren(...entities.map((s) => el("li", {}, el("button", { type: "button", onclick: () => open({ id: s.id }) }, s.name), ` (${s.mentions} chunks)`)));
    if (entities.length === 0) suggestions.append(el("li", { class: "hint" }, "No entity by that name."));
  });
  input.focus();
  if (!params.get("id") && !params.get("name")) return;
  const e = await api(withKb("/api/entity", { id: params.get("id"), name: params.get("id") ? null : params.get("name") }));
  input.value = e.name;
  view.append(
    el("h2", {}, e.name),
    el("p", { class: "meta" }, `Aliases: ${e.aliases.join(", ")} · ${e.degree} edges · mentioned in ${e.provenance_count} chunks`),
    el("div", { class: "entity-layout" },
      neighbourhood(e, (id) => open({ id })),
      el("div", {}, el("h2", {}, "Edges"),
        el("table", { id: "edges" }, el("tbody", {}, ...e.neighbours.map((n) => el("tr", {},
          el("td", {}, n.direction === "out" ? e.name : el("a", { href: `#/entity?id=${n.node}` }, n.name)),
          el("td", {}, n.relation),
          el("td", {}, n.direction === "out" ? el("a", { href: `#/entity?id=${n.node}` }, n.name) : e.name),
          el("td", { class: "meta" }, el("a", { href: `#chunk-${n.chunk}`, onclick: (ev) => { ev.preventDefault(); document.getElementById(`chunk-${n.chunk}`)?.scrollIntoView(); } }, `chunk ${n.chunk}`), ` · ${n.origin}`))))))),
    el("h2", {}, "Provenance"),
    ...e.provenance.map((c) => el("div", { class: "card", id: `chunk-${c.chunk}` },
      el("div", { class: "meta" }, `${c.title} · ${c.doc_id} · chunk ${c.chunk}`), el("div", { class: "source" }, c.text))),
  );
}

// The entity in the middle, its neighbours on a circle, edges labelled with their relation.
function neighbourhood(e, open) {
  const size = 520, c = size / 2, r = size / 2 - 70;
  const nodes = new Map();
  e.neighbours.forEach((n) => { if (!nodes.has(n.node)) nodes.set(n.node, { id: n.node, name: n.name || `#${n.node}` }); });
  const ring = [...nodes.values()];
  ring.forEach((n, i) => {
    const angle = (2 * Math.PI * i) / Math.max(ring.length, 1) - Math.PI / 2;
    n.x = c + r * Math.cos(angle);
    n.y = c + r * Math.sin(angle);
  });
  const at = (id) => (id === e.id ? { x: c, y: c } : nodes.get(id));
  const short = (s) => (s.length > 24 ? `${s.slice(0, 23)}…` : s);
  const lines = [];
  const edge = (a, b, relation) => {
    if (!a || !b) return;
    lines.push(svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y }),
      svg("text", { class: "rel", x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 3, "text-anchor": "middle" }, short(relation)));
  };
  e.neighbours.forEach((n) => edge(at(e.id), at(n.node), n.relation));
  e.links.forEach((l) => edge(at(l.subject), at(l.object), l.relation));
  const nodeGroup = (n, center) => svg("g", { class: center ? "node center" : "node", onclick: center ? () => {} : () => open(n.id) },
    svg("circle", { cx: n.x, cy: n.y, r: center ? 9 : 6 }),
    svg("text", { x: n.x, y: n.y + (center ? 22 : 18), "text-anchor": "middle" }, short(n.name)));
  return svg("svg", { class: "graph", id: "neighbourhood", viewBox: `0 0 ${size} ${size}`, role: "img", "aria-label": `neighbourhood of ${e.name}` },
    ...lines, ...ring.map((n) => nodeGroup(n, false)), nodeGroup({ id: e.id, name: e.name, x: c, y: c }, true));
}

async function askPage(root) {
  const question = el("input", { id: "question", size: 70, placeholder: "Ask the knowledge base", required: true });
  const form = el("form", { class: "filters" }, question, el("button", { type: "submit" }, "Ask"));
  const result = el("div", { id: "result" });
  root.append(el("h1", {}, "Ask"), form, result);
  question.focus();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    result.replaceChildren(el("p", { class: "hint" }, "Thinking…"));
    try {
      const r = await api("/api/ask", { method: "POST", body: { kb: state.kb, question: question.value } });
      result.replaceChildren(...answerView(r));
    } catch (e) {
      result.replaceChildren();
      fail(result, e);
    }
  });
}

function answerView(r) {
  const out = [];
  if (r.answer) {
    out.push(el("p", { class: "answer", id: "answer" }, r.answer),
      el("p", { class: "meta" }, `confidence ${(r.confidence ?? 0).toFixed(2)}`, r.proposals.length ? [" · ", el("a", { href: "#/review" }, `${r.proposals.length} proposed facts to review`)] : null));
  } else {
    out.push(el("p", { class: "answer abstained", id: "answer" }, `Abstained: ${r.abstained || "no answer"}`),
      r.candidate ? el("p", { class: "meta" }, `Best unverified candidate: ${r.candidate}`) : null);
  }
  const l = r.ledger;
  out.push(el("p", { class: "meta" }, `stage: ${r.stage || "none"} · iterations: ${r.iterations} · LLM calls: ${l.llm_calls} · tokens: ${l.prompt_tokens + l.completion_tokens}`));
  out.push(el("h2", {}, "Evidence"), ...r.evidence.map((c, i) => el("div", { class: "card evidence" },
    el("div", { class: "meta" }, `${i + 1}. ${c.title} · ${c.doc_id} · chunk ${c.chunk} · score ${c.score.toFixed(3)}${r.cited.includes(c.chunk) ? " · cited" : ""}`),
    el("div", { class: "source" }, c.text))));
  if (r.paths.length) {
    out.push(el("h2", {}, "Graph paths"), el("ol", {}, ...r.paths.map((p) => el("li", {},
      ...p.flatMap((h, i) => [i ? " → " : "", triple(h), el("span", { class: "meta" }, ` (chunk ${h.chunk})`)])))));
  }
  out.push(el("h2", {}, "Controller trace"), el("table", {}, el("tbody", {}, ...r.trace.map((t) =>
    el("tr", {}, el("td", {}, `${t.from} → ${t.to}`), el("td", {}, t.detail), el("td", { class: "meta" }, `${(t.micros / 1000).toFixed(1)} ms`))))));
  out.push(el("h2", {}, "Ledger"), el("table", {}, el("tbody", {}, ...l.entries.map((e) =>
    el("tr", {}, el("td", {}, e.step), el("td", {}, `${e.llm_calls} calls`), el("td", {}, `${e.prompt_tokens + e.completion_tokens} tokens${e.tokens_estimated ? " (est.)" : ""}`),
      el("td", { class: "meta" }, `${(e.micros / 1000).toFixed(1)} ms`))))));
  return out.filter(Boolean);
}

async function statusPage(root) {
  const s = await api(withKb("/api/status"));
  const rows = Object.entries(s.stats).map(([k, v]) => el("tr", {}, el("th", {}, k.replaceAll("_", " ")), el("td", {}, v)));
  root.append(el("h1", {}, `Status of ${s.kb}`),
    el("table", { id: "status" }, el("tbody", {},
      el("tr", {}, el("th", {}, "version"), el("td", {}, s.version)),
      el("tr", {}, el("th", {}, "uptime"), el("td", {}, `${s.uptime_s} s`)),
      el("tr", {}, el("th", {}, "pending requests"), el("td", {}, s.pending_requests)),
      el("tr", {}, el("th", {}, "LLM"), el("td", {}, s.llm ? "configured" : "embedded defaults")),
      el("tr", {}, el("th", {}, "knowledge bases"), el("td", {}, s.kbs.join(", "))),
      ...rows)),
    el("p", { class: "hint" }, "Scrapers read ", el("code", {}, "/metrics"), " with the token as a bearer header."));
}

// ---- session -------------------------------------------------------------------------------

function showLogin() {
  state.csrf = null;
  $("nav").hidden = true;
  $("who").hidden = true;
  $("page").replaceChildren();
  $("login").hidden = false;
  $("token").focus();
}

async function start() {
  try {
    const session = await api("/api/session");
    state.csrf = session.csrf;
    state.may = session.may || [];
    $("identity").textContent = `${session.token} (${session.scope})`;
    const kbs = session.kbs.length ? session.kbs : ["default"];
    if (!kbs.includes(state.kb)) state.kb = kbs[0];
    $("kb").replaceChildren(...kbs.map((k) => el("option", { value: k, selected: k === state.kb }, k)));
  } catch (e) {
    if (e instanceof Unauthorized) return showLogin();
    throw e;
  }
  $("login").hidden = true;
  $("nav").hidden = false;
  $("who").hidden = false;
  route();
}

document.addEventListener("DOMContentLoaded", () => {
  $("reviewer").value = state.reviewer;
  $("reviewer").addEventListener("change", () => {
    state.reviewer = $("reviewer").value.trim();
    localStorage.setItem("a2rag.reviewer", state.reviewer);
  });
  $("kb").addEventListener("change", () => { state.kb = $("kb").value; route(); });
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const { csrf } = await api("/login", { method: "POST", body: { token: $("token").value } });
      state.csrf = csrf;
      $("token").value = "";
      $("login-error").textContent = "";
      await start();
    } catch (e) {
      $("login-error").textContent = e instanceof Unauthorized ? "Wrong token." : e.message;
    }
  });
  $("logout").addEventListener("click", async () => {
    await api("/api/logout", { method: "POST" }).catch(() => {});
    showLogin();
  });
  window.addEventListener("hashchange", route);
  // Page shortcuts, unless the reader is typing.
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest && event.target.closest("input, textarea, select");
    if (typing || event.ctrlKey || event.metaKey || event.altKey || !keyHandler) return;
    if (keyHandler(event)) event.preventDefault();
  });
  start().catch((e) => fail($("page"), e));
});
