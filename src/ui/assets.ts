/**
 * The dashboard's one stylesheet and one script, served from /ui/assets/ (so the pages' CSP
 * allows no inline code). The script is progressive enhancement only: every page works without
 * it. It refreshes live regions while a run is in progress, asks before destructive forms, and
 * shows instants in the browser's time zone.
 */

export const STYLE_CSS = `
:root{--bg:#f6f7f9;--fg:#1c2128;--muted:#5b6573;--line:#d9dee5;--card:#fff;--accent:#2457c5;
--ok:#1a7f37;--warn:#9a6700;--bad:#c62828;--info:#2457c5;--code:#eef1f5;color-scheme:light}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.86em}
code{background:var(--code);padding:.05em .3em;border-radius:4px;overflow-wrap:anywhere}
.key{overflow-wrap:break-word}
pre{background:var(--code);padding:.6em .75em;border-radius:6px;overflow:auto;max-height:24em;margin:.4em 0;white-space:pre-wrap;overflow-wrap:anywhere}
.top{display:flex;flex-wrap:wrap;align-items:center;gap:.25rem 1rem;padding:.55rem 1rem;background:#1f2937;color:#fff}
.top .brand{color:#fff;font-weight:650;letter-spacing:.01em;margin-right:.5rem}
.top nav{display:flex;flex-wrap:wrap;gap:.15rem;flex:1}
.top nav a{color:#d1d5db;padding:.3rem .6rem;border-radius:6px}
.top nav a:hover{background:#374151;color:#fff;text-decoration:none}
.top nav a[aria-current=page]{background:#374151;color:#fff}
.top form{margin:0}.top button{background:transparent;color:#d1d5db;border:1px solid #4b5563}
main{max-width:1240px;margin:0 auto;padding:1rem}
h1{font-size:1.35rem;margin:.2rem 0 .8rem;overflow-wrap:anywhere}
h2{font-size:1.08rem;margin:1.4rem 0 .6rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.85rem 1rem;margin:.75rem 0}
.muted{color:var(--muted)}.small{font-size:.85em}
.table-wrap{overflow-x:auto;background:var(--card);border:1px solid var(--line);border-radius:8px;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;width:100%;font-size:.92em}
th,td{padding:.45rem .6rem;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600;white-space:nowrap;color:#374151}
tr:last-child td{border-bottom:0}
td.nowrap,th.nowrap{white-space:nowrap}
td.wrap{min-width:14em;max-width:32em;overflow-wrap:anywhere}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.empty{padding:1.2rem;text-align:center;color:var(--muted)}
.badge{display:inline-block;padding:.05em .5em;border-radius:999px;font-size:.8em;font-weight:600;
border:1px solid currentColor;white-space:nowrap;line-height:1.5}
.b-ok{color:var(--ok)}.b-bad{color:var(--bad)}.b-warn{color:var(--warn)}.b-info{color:var(--info)}.b-muted{color:var(--muted)}
.b-live{color:#fff;background:var(--info);border-color:var(--info)}
form.filters{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-end;margin:.5rem 0 .9rem}
form.filters>a{align-self:center;padding-top:1.1rem}
label{display:flex;flex-direction:column;gap:.2rem;font-size:.85em;color:var(--muted)}
input,select,textarea,button{font:inherit;font-size:.95rem;border:1px solid var(--line);border-radius:6px;
padding:.4rem .55rem;background:#fff;color:var(--fg);max-width:100%}
textarea{width:100%;min-height:4.5em;resize:vertical}
button,.button{cursor:pointer;background:var(--accent);color:#fff;border-color:var(--accent);font-weight:550;
padding:.4rem .85rem;border-radius:6px;display:inline-block}
button.secondary{background:#fff;color:var(--fg);border-color:var(--line)}
button.danger{background:#fff;color:var(--bad);border-color:var(--bad)}
button.small{padding:.15rem .55rem;font-size:.85rem}
.notice{border-left:4px solid var(--ok);background:#eef8f0;padding:.55rem .8rem;border-radius:6px;margin:.5rem 0}
.error{border-left:4px solid var(--bad);background:#fdecec;padding:.55rem .8rem;border-radius:6px;margin:.5rem 0;overflow-wrap:anywhere}
.pager{display:flex;gap:1rem;margin:.75rem 0;flex-wrap:wrap}
dl.fields{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem;margin:0}
dl.fields dt{color:var(--muted);font-size:.88em}dl.fields dd{margin:0;overflow-wrap:anywhere}
.grid2{display:grid;grid-template-columns:minmax(0,1.15fr) minmax(0,1fr);gap:0 1rem}
.grow{flex:1 1 20em}
.actions form{margin:.6rem 0}.row{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-end}
.msg{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.55rem .8rem;margin:.5rem 0}
.msg header{display:flex;flex-wrap:wrap;gap:.2rem .6rem;font-size:.8em;color:var(--muted);margin-bottom:.25rem}
.msg header .role{font-weight:650;color:var(--fg);text-transform:uppercase;letter-spacing:.03em}
.msg .text{white-space:pre-wrap;overflow-wrap:anywhere}
.msg.user{border-left:4px solid #6b7280}.msg.assistant{border-left:4px solid var(--accent)}
.msg.toolResult{border-left:4px solid #9ca3af;background:#fafbfc;padding:.3rem .8rem}
.msg.system{border-left:4px solid var(--warn)}
.msg:target{outline:2px solid var(--accent);outline-offset:2px}
ol.hits{list-style:none;padding:0;margin:0}
.hit{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.5rem .8rem;margin:.5rem 0}
.hit .excerpt{display:block;color:var(--fg);text-decoration:none;overflow-wrap:anywhere;margin-top:.2rem}
.hit mark{background:#fde68a;color:inherit;padding:0 .1em;border-radius:2px}
figure.chart{margin:.5rem 0;padding:.6rem .75rem}
figure.chart svg{display:block;width:100%;height:auto;max-height:320px}
figure.chart .bar:hover .cost{fill:#1a3f91}
figure.chart figcaption{margin-top:.35rem}
figure.chart svg.timeline{max-height:none}
figure.media{margin:.4rem 0}figure.media img{display:block;max-width:min(100%,360px);max-height:320px;border-radius:6px;border:1px solid var(--line)}
figure.media audio{display:block;width:min(100%,360px)}
.swatch-unpriced{display:inline-block;width:.9em;height:.9em;vertical-align:-.1em;border:1px solid #8a94a3;
background:repeating-linear-gradient(45deg,#8a94a3 0 1.5px,#eef1f5 1.5px 4px)}
.msg.compaction{border:1px dashed var(--warn);background:#fffbeb}
details>summary{cursor:pointer;color:var(--muted);font-size:.9em}
details.tool{margin:.3rem 0}
.statusbar{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:.3rem 0 .6rem}
.login{max-width:380px;margin:12vh auto;padding:1.4rem}
.login input{width:100%}
@media (max-width:760px){
main{padding:.6rem}
.grid2{grid-template-columns:minmax(0,1fr)}
.top{padding:.45rem .6rem;justify-content:space-between}
.top nav{order:3;flex-basis:100%;flex-wrap:nowrap;overflow-x:auto}.top nav a{padding:.25rem .5rem}
form.filters label{flex:1 1 40%}
}
`;

export const APP_JS = `
"use strict";
(function () {
  // Instants: the server writes UTC; show them in the browser's zone.
  function localize(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (!isNaN(d)) { t.title = t.textContent; t.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" }); }
    });
  }
  document.addEventListener("submit", function (e) {
    var msg = e.target.getAttribute && e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) e.preventDefault();
  });
  // Live regions: while one says a run is in progress, fetch its fragment and swap it in.
  var polls = 0, MAX_POLLS = 400;
  function tick() {
    var live = document.querySelectorAll("[data-live][data-active='1']");
    if (!live.length || polls++ > MAX_POLLS) return;
    Promise.all(Array.prototype.map.call(live, function (el) {
      return fetch(el.getAttribute("data-live"), { credentials: "same-origin", headers: { accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (!html) return;
          var tpl = document.createElement("template");
          tpl.innerHTML = html.trim();
          var next = tpl.content.firstElementChild;
          if (next && next.id === el.id) { localize(next); el.replaceWith(next); }
        });
    })).catch(function () {}).then(function () { setTimeout(tick, 1500); });
  }
  localize(document);
  setTimeout(tick, 1000);
})();
`;
