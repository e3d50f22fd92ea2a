// The outside IAM evaluator of the tests: @cloud-copilot/iam-simulate (npm, pinned in
// package.json; test-only). Reads a JSON array of simulations on stdin, writes a JSON
// array of {decision, errors, ignored} on stdout, one per simulation, in order.
//
// Each simulation is iam-simulate's own input plus an optional "mode": "Strict" (the
// default: the request exactly as supplied) or "Discovery" with "known": the context
// keys whose presence and value are authoritative. Role trust policies need it: the
// Service Authorization Reference data iam-simulate ships attaches the classic OIDC keys
// `<provider>:sub` and `<provider>:aud` to no action, so Strict mode drops them as
// unknown context; Discovery with those keys declared known decides on their values.
'use strict';
const { runSimulation } = require('@cloud-copilot/iam-simulate');

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const simulations = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const out = [];
  for (const { mode, known, ...simulation } of simulations) {
    const discoveryContextKeyConstraints = (known || []).map((keyName) => ({
      keyName,
      presenceIsKnown: true,
      valueIsKnown: true,
    }));
    const response = await runSimulation(
      { serviceControlPolicies: [], resourceControlPolicies: [], ...simulation },
      { simulationMode: mode || 'Strict', discoveryContextKeyConstraints }
    );
    if (response.resultType === 'error') {
      out.push({ decision: 'Error', errors: response.errors, ignored: [] });
      continue;
    }
    const results = response.resultType === 'single' ? [response.result] : response.results;
    const ignored = results.flatMap((r) => r.ignoredContextKeys || []);
    out.push({ decision: response.overallResult, errors: null, ignored });
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
