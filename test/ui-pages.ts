/**
 * Every page of the operator dashboard, for the tests that visit them all: the workerd tests of
 * its login and CSRF rules, and the browser tests.
 */
export const UI_PAGES = [
  "/ui",
  "/ui/sessions",
  "/ui/search?q=hello",
  "/ui/session?key=agent:main:main",
  "/ui/runs",
  "/ui/usage",
  "/ui/deliveries",
  "/ui/jobs",
  "/ui/pairing",
  "/ui/audit",
];
