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
