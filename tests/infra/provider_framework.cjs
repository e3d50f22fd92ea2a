// Runs the CDK Provider framework's own onEvent (framework.js from the synthesized
// cloud assembly, the code the framework Lambda runs) on one CloudFormation event read
// from stdin, and lets it log as it does in Lambda (console.log -> stdout).
//
// Only its two outbound calls are replaced, through the module's own exports:
// invokeFunction (Lambda Invoke of the user handler) answers with the handler result
// given in argv[3], and httpRequest (the PUT of the response to CloudFormation's
// ResponseURL) does nothing. @aws-sdk/client-lambda and -sfn, which the Lambda runtime
// provides, are empty stand-ins (NODE_PATH) because nothing here calls them.
'use strict';
const path = require('path');

async function main() {
  const asset = path.resolve(process.argv[2]);
  const result = JSON.parse(process.argv[3]);
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const event = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const outbound = require(path.join(asset, 'outbound.js'));
  outbound.invokeFunction = async () => ({ Payload: Buffer.from(JSON.stringify(result)) });
  outbound.httpRequest = async () => undefined;
  process.env.USER_ON_EVENT_FUNCTION_ARN =
    'arn:aws:lambda:us-east-1:123456789012:function:peagle-model-on-event';
  const framework = require(path.join(asset, 'framework.js'));
  await framework.onEvent(event);
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
