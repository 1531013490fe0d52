// The portal's API types (src/api/types.ts) held to schemas/openapi.yaml: each
// declaration's @openapi tag names its schema, and every field it declares
// must be there with a compatible type, every required one declared. The
// types are read as TypeScript syntax (the compiler's parser), the spec with
// swagger-parser ($refs resolved), so neither is copied into this test.
import SwaggerParser from "@apidevtools/swagger-parser";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// A JSON Schema (OpenAPI 3.0's dialect, or 2020-12's for the schema files),
// read loosely: only what the check below looks at.
interface Schema {
  type?: string | string[];
  nullable?: boolean;
  enum?: unknown[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  required?: string[];
  items?: Schema;
  allOf?: Schema[];
  [key: string]: unknown;
}

const repo = (path: string): string => decodeURIComponent(new URL(`../../../${path}`, import.meta.url).pathname);

function readSource(path: string): ts.SourceFile {
  const text = ts.sys.readFile(repo(path));
  if (text === undefined) throw new Error(`cannot read ${path}`);
  return ts.createSourceFile(path, text, ts.ScriptTarget.ES2022, true);
}

// --- finding the schema a tag names ---

type Docs = { openapi: Schema & { paths: Record<string, Record<string, Schema>>; components: { schemas: Record<string, Schema> } }; files: Map<string, Schema> };

function operation(docs: Docs, method: string, path: string): Schema {
  const op = docs.openapi.paths[path]?.[method.toLowerCase()];
  if (op === undefined) throw new Error(`no ${method} ${path} in openapi.yaml`);
  return op;
}

// "GET /v1/nodes" (its success body), "... body" (request), "... query"; a
// component name; or a schema file; then an optional ".a[].b{}" path.
function schemaOf(docs: Docs, tag: string): Schema {
  const words = tag.trim().split(/\s+/);
  let schema: Schema;
  let rest: string;
  if (/^[A-Z]+$/.test(words[0]!)) {
    const op = operation(docs, words[0]!, words[1]!);
    const what = words[2];
    rest = words.slice(3).join("");
    if (what === "body") {
      schema = (op.requestBody as { content: Record<string, { schema: Schema }> }).content["application/json"]!.schema;
    } else if (what === "query") {
      const params = (op.parameters ?? []) as { name: string; in: string; schema: Schema }[];
      schema = { type: "object", properties: Object.fromEntries(params.filter((p) => p.in === "query").map((p) => [p.name, p.schema])) };
    } else {
      rest = words.slice(2).join("");
      const responses = op.responses as Record<string, { content?: Record<string, { schema: Schema }> }>;
      const ok = Object.keys(responses).find((code) => code.startsWith("2"));
      schema = responses[ok!]!.content!["application/json"]!.schema;
    }
  } else if (words[0]!.endsWith(".json")) {
    schema = docs.files.get(words[0]!)!;
    rest = words.slice(1).join("");
  } else {
    const name = /^[A-Za-z]+/.exec(words[0]!)![0];
    schema = docs.openapi.components.schemas[name]!;
    if (schema === undefined) throw new Error(`no components/schemas/${name}`);
    rest = words[0]!.slice(name.length) + words.slice(1).join("");
  }
  if (/^[a-z_]/.test(rest)) rest = `.${rest}`;
  for (const step of rest.match(/\.[a-z_]+|\[\]|\{\}/g) ?? []) {
    schema = flat(schema);
    const next = step === "[]" ? schema.items : step === "{}" ? (schema.additionalProperties as Schema) : schema.properties?.[step.slice(1)];
    if (next === undefined || typeof next !== "object") throw new Error(`${tag}: no ${step}`);
    schema = next;
  }
  return schema;
}

// allOf: [X] with nullable beside it (the spec's "nullable $ref") as one schema.
function flat(s: Schema): Schema {
  if (s.allOf === undefined) return s;
  const { allOf, ...own } = s;
  return Object.assign({}, ...allOf.map(flat), own);
}

function types(s: Schema): string[] {
  if (Array.isArray(s.type)) return s.type.filter((t) => t !== "null");
  if (s.type !== undefined) return [s.type];
  if (s.enum !== undefined) return [...new Set(s.enum.filter((v) => v !== null).map((v) => typeof v))];
  if (s.properties !== undefined || s.additionalProperties !== undefined) return ["object"];
  return [];
}

function nullable(s: Schema): boolean {
  return s.nullable === true || (Array.isArray(s.type) && s.type.includes("null")) || (s.enum?.includes(null) ?? false);
}

// --- comparing a TypeScript type with a schema ---

class Checker {
  readonly problems: string[] = [];
  constructor(private readonly decls: Map<string, ts.InterfaceDeclaration | ts.TypeAliasDeclaration>) {}

  private fail(where: string, what: string): void {
    this.problems.push(`${where}: ${what}`);
  }

  // The type's members when it is a union (flattened through local aliases).
  private members(t: ts.TypeNode): ts.TypeNode[] {
    if (ts.isUnionTypeNode(t)) return t.types.flatMap((m) => this.members(m));
    if (ts.isParenthesizedTypeNode(t)) return this.members(t.type);
    if (ts.isTypeReferenceNode(t) && t.typeArguments === undefined) {
      const d = this.decls.get(t.typeName.getText());
      if (d !== undefined && ts.isTypeAliasDeclaration(d)) return this.members(d.type);
    }
    return [t];
  }

  type(t: ts.TypeNode, schema: Schema, where: string): void {
    const s = flat(schema);
    const all = this.members(t);
    const isNull = (m: ts.TypeNode) => ts.isLiteralTypeNode(m) && m.literal.kind === ts.SyntaxKind.NullKeyword;
    const rest = all.filter((m) => !isNull(m));
    if (rest.some((m) => m.kind === ts.SyntaxKind.UnknownKeyword)) return;
    if (all.some(isNull) !== nullable(s)) this.fail(where, nullable(s) ? "the schema is nullable: add | null" : "the schema is not nullable: drop | null");
    const literals = rest.filter((m) => ts.isLiteralTypeNode(m) && ts.isStringLiteral(m.literal));
    if (literals.length > 0) {
      const mine = literals.map((m) => ((m as ts.LiteralTypeNode).literal as ts.StringLiteral).text).sort();
      const theirs = (s.enum ?? []).filter((v) => v !== null).map(String).sort();
      if (literals.length !== rest.length || JSON.stringify(mine) !== JSON.stringify(theirs))
        this.fail(where, `a string union must be the schema's enum [${theirs.join(", ")}], not [${mine.join(", ")}]`);
      return;
    }
    for (const m of rest) this.one(m, s, where);
  }

  private one(t: ts.TypeNode, s: Schema, where: string): void {
    const want = types(s);
    const expect = (...kinds: string[]) => {
      if (!want.some((k) => kinds.includes(k))) this.fail(where, `declared ${t.getText()}, the schema says ${want.join("|") || "nothing"}`);
    };
    switch (t.kind) {
      case ts.SyntaxKind.StringKeyword:
        return expect("string");
      case ts.SyntaxKind.NumberKeyword:
        return expect("number", "integer");
      case ts.SyntaxKind.BooleanKeyword:
        return expect("boolean");
    }
    if (ts.isArrayTypeNode(t)) {
      expect("array");
      if (s.items !== undefined) this.type(t.elementType, s.items, `${where}[]`);
      return;
    }
    if (ts.isTypeLiteralNode(t)) return this.object(t.members, s, where);
    if (ts.isTypeReferenceNode(t)) {
      const name = t.typeName.getText();
      if (name === "Record" && t.typeArguments?.length === 2) {
        expect("object");
        const values = s.additionalProperties;
        if (typeof values === "object") this.type(t.typeArguments[1]!, values, `${where}{}`);
        else if (values === false || s.properties !== undefined) this.fail(where, "declared a map, the schema has fixed properties");
        return;
      }
      const d = this.decls.get(name);
      if (d !== undefined && ts.isInterfaceDeclaration(d)) return this.object(d.members, s, where);
    }
    this.fail(where, `cannot compare ${t.getText()} with the schema`);
  }

  object(members: ts.NodeArray<ts.TypeElement>, s: Schema, where: string): void {
    if (!types(s).includes("object")) {
      this.fail(where, `declared an object, the schema says ${types(s).join("|") || "nothing"}`);
      return;
    }
    const declared = new Map<string, boolean>();
    for (const m of members) {
      if (!ts.isPropertySignature(m) || m.type === undefined) {
        this.fail(where, `cannot compare ${m.getText()}`);
        continue;
      }
      const name = m.name.getText().replace(/^"|"$/g, "");
      declared.set(name, m.questionToken === undefined);
      const field = s.properties?.[name] ?? (typeof s.additionalProperties === "object" ? s.additionalProperties : undefined);
      if (field === undefined) {
        // An object schema that names no fields (`{type: object}`) is opaque: nothing to hold them to.
        if (s.properties !== undefined || s.additionalProperties !== undefined) this.fail(`${where}.${name}`, "not in the schema");
        continue;
      }
      this.type(m.type, field, `${where}.${name}`);
    }
    for (const r of s.required ?? []) {
      if (!declared.has(r)) this.fail(`${where}.${r}`, "required by the schema, not declared");
      else if (declared.get(r) === false) this.fail(`${where}.${r}`, "required by the schema, declared optional");
    }
  }
}

function find<T extends ts.Node>(n: ts.Node, is: (x: ts.Node) => x is T): T | undefined {
  return is(n) ? n : ts.forEachChild(n, (child) => find(child, is));
}

async function load(): Promise<{ docs: Docs; decls: Map<string, ts.InterfaceDeclaration | ts.TypeAliasDeclaration>; tags: Map<string, string | undefined> }> {
  const openapi = (await SwaggerParser.dereference(repo("schemas/openapi.yaml"))) as unknown as Docs["openapi"];
  const files = new Map<string, Schema>();
  for (const f of ["validation-report.schema.json"]) files.set(f, JSON.parse(ts.sys.readFile(repo(`schemas/${f}`))!) as Schema);
  const source = readSource("web/src/api/types.ts");
  const decls = new Map<string, ts.InterfaceDeclaration | ts.TypeAliasDeclaration>();
  const tags = new Map<string, string | undefined>();
  for (const st of source.statements) {
    if (!ts.isInterfaceDeclaration(st) && !ts.isTypeAliasDeclaration(st)) continue;
    decls.set(st.name.text, st);
    const tag = ts.getJSDocTags(st).find((t) => t.tagName.text === "openapi");
    tags.set(st.name.text, typeof tag?.comment === "string" ? tag.comment : undefined);
  }
  return { docs: { openapi, files }, decls, tags };
}

describe("src/api/types.ts against schemas/openapi.yaml", async () => {
  const { docs, decls, tags } = await load();

  it("names the schema of every type it declares", () => {
    expect([...tags].filter(([, tag]) => tag === undefined).map(([name]) => name)).toEqual([]);
    expect(decls.size).toBeGreaterThan(20);
  });

  for (const [name, tag] of tags) {
    if (tag === undefined) continue;
    it(`${name} is ${tag}`, () => {
      const c = new Checker(decls);
      const d = decls.get(name)!;
      const schema = schemaOf(docs, tag);
      if (ts.isInterfaceDeclaration(d)) c.object(d.members, flat(schema), name);
      else c.type(d.type, schema, name);
      expect(c.problems).toEqual([]);
    });
  }

  // Each call in src/api/client.ts answers with the type its route's schema
  // describes: `Promise<T>` of a method that does this.call("GET", `/v1/x/${seg(id)}`).
  it("types every call in src/api/client.ts as its route's answer", () => {
    const client = readSource("web/src/api/client.ts");
    const routes = new Map(Object.keys(docs.openapi.paths).map((p) => [p.replace(/\{[^}]*\}/g, "{}"), p]));
    const checked: string[] = [];
    const c = new Checker(decls);
    const visit = (n: ts.Node): void => {
      if (ts.isMethodDeclaration(n) && n.type !== undefined && ts.isTypeReferenceNode(n.type) && n.type.typeArguments?.length === 1) {
        const call = find(n, (x): x is ts.CallExpression => ts.isCallExpression(x) && x.expression.getText() === "this.call");
        if (call === undefined) return;
        const [method, path] = call.arguments;
        const template = ts.isNoSubstitutionTemplateLiteral(path!) || ts.isStringLiteral(path!) ? path!.text : (path as ts.TemplateExpression).head.text +
          (path as ts.TemplateExpression).templateSpans.map((sp) => (sp.expression.getText().startsWith("query(") ? "" : "{}") + sp.literal.text).join("");
        const spec = routes.get(template);
        const where = `${n.name.getText()}(): ${(method as ts.StringLiteral).text} ${template}`;
        if (spec === undefined) throw new Error(`${where}: no such route in openapi.yaml`);
        c.type(n.type.typeArguments[0]!, schemaOf(docs, `${(method as ts.StringLiteral).text} ${spec}`), where);
        checked.push(n.name.getText());
      }
      ts.forEachChild(n, visit);
    };
    visit(client);
    expect(c.problems).toEqual([]);
    expect(checked.length).toBeGreaterThanOrEqual(15);
  });

  it("finds what differs (the check itself)", () => {
    const probe = ts.createSourceFile(
      "probe.ts",
      "interface P { id: number; nme: string; state: 'pending' | 'ready'; last_error: string; nodes?: string; }",
      ts.ScriptTarget.ES2022,
      true,
    );
    const p = probe.statements[0] as ts.InterfaceDeclaration;
    const c = new Checker(new Map([["P", p]]));
    c.object(p.members, { ...flat(schemaOf(docs, "Allocation")), required: ["id", "nodes"] }, "P");
    expect(c.problems).toEqual([
      "P.id: declared number, the schema says string",
      "P.nme: not in the schema",
      "P.state: a string union must be the schema's enum [failed, pending, provisioning, ready, released, releasing], not [pending, ready]",
      "P.last_error: the schema is nullable: add | null",
      "P.nodes: declared string, the schema says array",
      "P.nodes: required by the schema, declared optional",
    ]);
  });
});
