// Test-only oracle: run each simulation of a JSON list (stdin) through
// @cloud-copilot/iam-simulate and print {id: overallResult} (stdout).
// An input the package refuses is reported as "error: <message>", never skipped.
const { runSimulation } = require('@cloud-copilot/iam-simulate');

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const cases = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const out = {};
  for (const { id, simulation } of cases) {
    const result = await runSimulation(simulation, {});
    if (result.resultType === 'error') {
      out[id] = 'error: ' + JSON.stringify(result.errors).slice(0, 500);
    } else {
      out[id] = result.overallResult;
    }
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err));
  process.exit(1);
});
