/**
 * The layering of src/, checked by `npm test` (npm run lint:layers). Lower layers never import
 * upper ones; type-only imports count too (tsPreCompilationDeps), because a type import is still
 * a dependency a reader has to follow.
 *
 *   transcript, keys, time, config, version  neutral shapes and pure rules (config may use keys)
 *   policy, db                               pure policy; D1 schema and named queries
 *   connectors                               chat platforms: verify, normalize to SPEC §4, send (no sessions)
 *   runs, views, delivery, agent             the run contract, JSON views, connector delivery, model loop
 *   tools                                    agent tools (reach sessions through a port in their context)
 *   session                                  the SessionActor and its modules
 *   cron, rpc                                scheduled maintenance, operator methods (rpc may read cron)
 *   routes, http, auth/bearer                the HTTP surface
 *   ui                                       the operator dashboard: like routes, mounted only by http/app.ts
 * views are pure (rows in, a page, card or text out): they read nothing from D1 and name their own
 * input types, which db rows satisfy as they are; so they import nothing from db, not even a type.
 * auth/signature.ts (HMAC signatures, stable ids, constant-time compare) is pure and usable by all.
 * The CLI (cli/, bin/) is a Node program that speaks to a gateway over HTTP: it imports nothing
 * from src/, and src/ nothing from it.
 *
 * Inside src/session/ (the SessionActor), by subfolder:
 *   entry/rules, freshness, reset-trigger, flows/plans, context/system-prompt   pure rules: no other module of the actor
 *   storage/                                                                   the actor's SQLite: nothing else of the actor
 *   d1/                                      the D1 write path: storage/ and the entry's rules only
 *   context/, chat/, flows/                  what a run uses: not the run itself (run/ but its live state, queue
 *                                            types and admission rules), the scheduler or the actor
 *   run/                                     the run: anything but the scheduler and the actor
 *   scheduler.ts                             the alarm and the passes: run/, d1/, storage/ as types
 *   actor.ts                                 wires them; nothing in the actor imports it
 */
const layer = (name, forbidden) => ({
  name: `${name}-layer`,
  severity: "error",
  comment: `src/${name}/ must not depend on ${forbidden.join(", ")}`,
  from: { path: `^src/${name}/` },
  to: { path: `^src/(${forbidden.join("|")})(/|\\.ts$)` },
});

const UPPER_THAN_TOOLS = ["session", "rpc", "cron", "routes", "http", "auth/bearer"];
const UPPER_THAN_VIEWS = ["tools", ...UPPER_THAN_TOOLS];

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "Import cycles hide which module owns what.",
      from: { path: "^(src|cli)/" },
      to: { circular: true },
    },
    layer("transcript", ["keys", "config", "policy", "db", "runs", "views", "delivery", "agent", ...UPPER_THAN_VIEWS, "connectors"]),
    layer("time", ["transcript", "keys", "config", "policy", "db", "runs", "views", "delivery", "agent", ...UPPER_THAN_VIEWS, "connectors"]),
    layer("keys", ["transcript", "config", "policy", "db", "runs", "views", "delivery", "agent", ...UPPER_THAN_VIEWS, "connectors"]),
    // config may use the pure key rules (an identityLinks name must make a valid peer id).
    layer("config", ["transcript", "policy", "db", "runs", "views", "delivery", "agent", ...UPPER_THAN_VIEWS, "connectors"]),
    layer("policy", ["db", "runs", "views", "delivery", "agent", ...UPPER_THAN_VIEWS, "connectors"]),
    layer("db", ["keys", "policy", "runs", "views", "delivery", "agent", ...UPPER_THAN_VIEWS, "connectors"]),
    layer("connectors", ["transcript", "policy", "db", "runs", "views", "delivery", "agent", ...UPPER_THAN_VIEWS]),
    layer("runs", ["views", "delivery", "agent", ...UPPER_THAN_VIEWS, "connectors"]),
    layer("views", ["delivery", "agent", ...UPPER_THAN_VIEWS, "connectors"]),
    {
      name: "views-pure",
      severity: "error",
      comment:
        "src/views/ is pure: rows in, a page, card or text out. Callers read D1 and pass rows in; views " +
        "name their own input types, so they import nothing from src/db/ (type-only imports included).",
      from: { path: "^src/views/" },
      to: { path: "^src/db/" },
    },
    layer("delivery", ["views", "agent", ...UPPER_THAN_VIEWS]),
    layer("agent", ["views", "delivery", "session", "rpc", "cron", "routes", "http", "auth/bearer"]),
    layer("tools", UPPER_THAN_TOOLS),
    layer("session", ["rpc", "cron", "routes", "http"]),
    layer("rpc", ["tools", "routes", "http/app"]),
    layer("cron", ["tools", "rpc", "routes", "http"]),
    {
      name: "cli-over-http",
      severity: "error",
      comment: "The CLI reaches the gateway over HTTP only; it never imports Worker code.",
      from: { path: "^(cli|bin)/" },
      to: { path: "^src/" },
    },
    {
      name: "worker-without-cli",
      severity: "error",
      comment: "Worker code never depends on the CLI.",
      from: { path: "^src/" },
      to: { path: "^(cli|bin)/" },
    },
    // --- inside the SessionActor (src/session/) ----------------------------------------------
    {
      name: "session-pure-rules",
      severity: "error",
      comment: "The actor's pure rules use no other module of the actor",
      from: {
        path: "^src/session/(entry/(rules|freshness|reset-trigger)|flows/plans|context/system-prompt)\\.ts$",
      },
      to: {
        path: "^src/session/",
        pathNot: "^src/session/(entry/(rules|freshness|reset-trigger)|flows/plans|context/system-prompt)\\.ts$",
      },
    },
    {
      name: "session-storage",
      severity: "error",
      comment: "src/session/storage/ (the actor's SQLite) uses nothing else of the actor",
      from: { path: "^src/session/storage/" },
      to: { path: "^src/session/", pathNot: "^src/session/storage/" },
    },
    {
      name: "session-d1",
      severity: "error",
      comment: "src/session/d1/ (the D1 write path) uses only storage/ and the entry's rules",
      from: { path: "^src/session/d1/" },
      to: { path: "^src/session/", pathNot: "^src/session/(d1/|storage/|entry/rules\\.ts$)" },
    },
    {
      name: "session-run-users",
      severity: "error",
      comment:
        "context/, chat/ and flows/ serve a run: they do not drive it (run/ only for its live state, queue types and admission rules)",
      from: { path: "^src/session/(context|chat|flows)/" },
      to: { path: "^src/session/(run/(lifecycle|turn|waiters)\\.ts$|scheduler\\.ts$|actor\\.ts$)" },
    },
    {
      name: "session-run",
      severity: "error",
      comment: "src/session/run/ does not reach the scheduler or the actor",
      from: { path: "^src/session/run/" },
      to: { path: "^src/session/(scheduler|actor)\\.ts$" },
    },
    {
      name: "session-actor-on-top",
      severity: "error",
      comment: "Nothing in the SessionActor imports actor.ts (src/index.ts exports it)",
      from: { path: "^src/session/", pathNot: "^src/session/actor\\.ts$" },
      to: { path: "^src/session/actor\\.ts$" },
    },
    layer("ui", ["routes", "http/app"]),
    {
      name: "ui-only-from-app",
      severity: "error",
      comment: "src/ui/ is mounted by src/http/app.ts and imported by nothing else",
      from: { path: "^src/", pathNot: "^src/(ui/|http/app\\.ts$)" },
      to: { path: "^src/ui/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)worker-configuration\\.d\\.ts$" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
