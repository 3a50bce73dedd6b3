/* evalkit view, core: the data registration, helpers, loading, routing and keys. Plain JavaScript, no build
   step, no network. The data arrives as <script> files that call EVK.meta / EVK.ids / EVK.rows / EVK.items
   (file:// pages may not fetch local files). Every text from the data is put in the page with
   textContent, never parsed as HTML. The views (overview.js, samples.js, item.js) share window.EVKV. */
(function () {
  "use strict";

  var PAGE = 50;
  var STATUS = ["correct", "wrong", "unparsed", "errors", "refusals", "cutoffs", "missing"];
  var BIT = { correct: 1, wrong: 2, unparsed: 4, errors: 8, refusals: 16, cutoffs: 32, missing: 64 };
  var WORD = { correct: "correct", wrong: "wrong", unparsed: "unparsed", errors: "error", refusals: "refusal",
    cutoffs: "cut off", missing: "no answer" };
  var MARK = { correct: "\u2713", wrong: "\u2717", unparsed: "?", errors: "!", refusals: "\u2298", cutoffs: "\u2702",
    missing: "\u2013" };
  var MODELS_DISAGREE = 1, VARIANTS_DISAGREE = 2;

  var S = {
    meta: null, ids: [], pos: new Map(), rows: [], chunksLoaded: 0, loadingRows: false,
    items: {}, waiting: {}, search: [], filter: null, matches: null, matchedUpTo: 0,
    page: 0, cursor: 0, view: null, itemPos: -1, ready: false
  };

  window.EVK = {
    meta: function (m) { S.meta = m; },
    ids: function (a) { S.ids = a; S.pos = new Map(); for (var i = 0; i < a.length; i++) S.pos.set(a[i], i); },
    rows: function (k, rows) {
      var base = k * S.meta.rc;
      for (var i = 0; i < rows.length; i++) S.rows[base + i] = rows[i];
      S.chunksLoaded = Math.max(S.chunksLoaded, k + 1);
      rowsArrived();
    },
    items: function (k, list) {
      S.items[k] = list;
      var cbs = S.waiting[k] || [];
      delete S.waiting[k];
      cbs.forEach(function (cb) { cb(list); });
    }
  };

  // ---------------------------------------------------------------- helpers
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] == null || attrs[k] === false) continue;
        if (k === "class") el.className = attrs[k];
        else if (k === "text") el.textContent = attrs[k];
        else if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), attrs[k]);
        else el.setAttribute(k, attrs[k] === true ? "" : attrs[k]);
      }
    }
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function add(el, kid) {
    if (kid == null || kid === false) return;
    if (Array.isArray(kid)) { kid.forEach(function (k) { add(el, k); }); return; }
    el.appendChild(typeof kid === "object" ? kid : document.createTextNode(String(kid)));
  }
  function num(v, digits) {
    if (v == null) return "\u2014";
    if (typeof v === "number") {
      if (Number.isInteger(v)) return v.toLocaleString("en-US");
      return v.toFixed(digits == null ? 2 : digits);
    }
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }
  function loadScript(src, onerror) {
    var s = document.createElement("script");
    s.src = src + "?v=" + S.meta.stamp;
    s.onerror = onerror || null;
    document.body.appendChild(s);
  }
  function params() { return new URLSearchParams(location.hash.replace(/^#/, "")); }
  function setHash(p, replace) {
    var text = "#" + p.toString();
    if (replace) history.replaceState(null, "", text); else location.hash = text;
  }
  function main() { return document.getElementById("main"); }
  function table(head, rows, numeric) {
    return h("div", { class: "scroll" }, h("table", null,
      h("thead", null, h("tr", null, head.map(function (c, i) {
        return h("th", { scope: "col", class: numeric && numeric(i) ? "num" : null, text: c });
      }))),
      h("tbody", null, rows.map(function (r) {
        return h("tr", null, r.map(function (c, i) {
          var node = c && typeof c === "object" && c.nodeType ? c : null;
          return h(i === 0 ? "th" : "td", { scope: i === 0 ? "row" : null,
            class: typeof c === "number" ? "num" : null }, node || num(c));
        }));
      }))));
  }


  // ---------------------------------------------------------------- data loading
  function loadNextRows() {
    if (S.loadingRows || S.chunksLoaded >= S.meta.nr) return;
    S.loadingRows = true;
    loadScript("data/rows-" + String(S.chunksLoaded).padStart(3, "0") + ".js", function () {
      S.loadingRows = false;
      setStatus("could not load rows chunk " + S.chunksLoaded);
    });
  }
  function rowsArrived() {
    S.loadingRows = false;
    if (S.view === "samples" && K.onRows) K.onRows();
    if (S.chunksLoaded < S.meta.nr) setTimeout(loadNextRows, 0);
  }
  function loadedRows() { return Math.min(S.ids.length, S.chunksLoaded * S.meta.rc); }
  function withItems(pos, cb) {
    var k = Math.floor(pos / S.meta.dc);
    if (S.items[k]) { cb(S.items[k][pos - k * S.meta.dc]); return; }
    var first = !S.waiting[k];
    (S.waiting[k] = S.waiting[k] || []).push(function (list) { cb(list[pos - k * S.meta.dc]); });
    if (first) loadScript("data/items-" + String(k).padStart(3, "0") + ".js", function () {
      main().replaceChildren(h("p", { class: "notes", text: "could not load data/items-" + k + ".js" }));
    });
  }
  function setStatus(text) {
    var el = document.getElementById("count");
    if (el) el.textContent = text;
  }


  // ---------------------------------------------------------------- routing
  function route() {
    var p = params();
    if (p.has("item")) return K.showItem(p.get("item"));
    if (p.get("view") === "samples") return K.showSamples(p);
    return K.showOverview();
  }
  function setTab(name) {
    ["overview", "samples"].forEach(function (t) {
      var a = document.getElementById("nav-" + t);
      if (a) { if (t === name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current"); }
    });
  }


  // ---------------------------------------------------------------- keys
  function onKey(e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target, tag = t && t.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || (t && t.isContentEditable)) return;
    var handler = K.keys[S.view];
    if (handler) handler(e);
  }
  function openPos(pos) {
    var p = new URLSearchParams(); p.set("item", S.ids[pos]);
    setHash(p, false);
  }

  // ---------------------------------------------------------------- start
  function start() {
    if (!S.meta) { main().replaceChildren(h("p", { class: "notes", text: "data/meta.js did not load: rebuild the site with `evalkit view`." })); return; }
    document.getElementById("bench").textContent = S.meta.bench + " \u00b7 " + S.meta.models.join(", ");
    document.getElementById("built").textContent = "built " + S.meta.built + " by evalkit " + S.meta.evalkit;
    document.title = S.meta.bench + " \u2014 evalkit view";
    window.addEventListener("hashchange", route);
    document.addEventListener("keydown", onKey);
    loadNextRows();
    route();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();

  var K = window.EVKV = {
    S: S, PAGE: PAGE, STATUS: STATUS, BIT: BIT, WORD: WORD, MARK: MARK, MODELS_DISAGREE: MODELS_DISAGREE,
    VARIANTS_DISAGREE: VARIANTS_DISAGREE, h: h, num: num, loadScript: loadScript, params: params,
    setHash: setHash, main: main, table: table, loadedRows: loadedRows, withItems: withItems, setStatus: setStatus,
    setTab: setTab, openPos: openPos, keys: {}
  };
})();
