// Types of @hold-dev/hold for import: the same as for require(), which
// index.d.cts declares, as index.js re-exports index.cjs.
export * from './index.cjs';
