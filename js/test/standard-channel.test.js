// The API tests again, with every request on the agent's standard channel
// (its stdin and stdout), as on systems without FIFOs: the package must
// behave the same either way.
process.env.HOLD_AGENT_SYNC = '0';
await import('./api.test.js');
await import('./lost.test.js');
