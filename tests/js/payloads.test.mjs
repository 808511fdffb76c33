// The JS payload table (web/payloads.js) against the JSON Schema the Python models write
// (docs/schema/, kept equal to `nua schema` by tests/protocol/test_schema_and_api.py).
// Every action type's fields, derived from the schema, must match the table: the same
// names, the same required-ness, the same defaults, the same nested models. A field added
// to actions.py (and so to the schema) without the table fails here. The state the reducer
// builds is checked the same way against state.schema.json.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";

import { CONTENT, CONTENT_PARTS, ENVELOPE, PAYLOADS } from "../../src/opennua/web/payloads.js";
import { ACTION_TYPES, initialState, replay } from "../../src/opennua/web/reducer.js";

const schemaOf = (name) =>
  JSON.parse(readFileSync(new URL(`../../docs/schema/${name}.schema.json`, import.meta.url)));
const ACTIONS = schemaOf("action");
const STATE = schemaOf("state");

const refName = (ref) => ref.replace(/^#\/\$defs\//, "");

/**
 * What a property holds, from its schema: {nullable, model} for a nested model, {nullable,
 * list} for a list of models, {parts} for content, {json} for free JSON, else {value}.
 */
function shapeOf(property) {
  let node = property;
  let nullable = false;
  if (node.anyOf) {
    const others = node.anyOf.filter((branch) => branch.type !== "null");
    nullable = others.length < node.anyOf.length;
    assert.equal(others.length, 1, `cannot read ${JSON.stringify(property)}`);
    node = others[0];
  }
  // Free JSON includes null whatever the schema says around it.
  if (node.$ref === "#/$defs/JsonValue") return { json: true };
  if (node.$ref) return { nullable, model: refName(node.$ref) };
  if (node.type === "object" && node.additionalProperties) return { json: true };
  if (node.type === "array" && node.items?.oneOf) {
    return { nullable, parts: node.items.oneOf.map((part) => refName(part.$ref)) };
  }
  if (node.type === "array" && node.items?.$ref) {
    return { nullable, list: refName(node.items.$ref) };
  }
  return { nullable, value: true };
}

/** One JS field descriptor in the same terms as `shapeOf`. */
function shapeOfSpec(spec) {
  const nullable = !spec.required && spec.default === null;
  if (spec.kind === "json") return { json: true };
  if (spec.kind === "model") return { nullable, model: spec.model.name };
  if (spec.kind === "list") return { nullable, list: spec.model.name };
  if (spec.kind === "parts") return { nullable, parts: null };
  return { nullable, value: true };
}

/** Compare one pydantic model's schema with a JS model, recursing into nested models. */
function compareModel(defName, model, where, { skip = [] } = {}) {
  const definition = ACTIONS.$defs[defName];
  assert.ok(definition, `${where}: the schema has no ${defName}`);
  assert.equal(model.name, defName, `${where}: the JS model is ${model.name}, not ${defName}`);
  const properties = Object.keys(definition.properties).filter((key) => !skip.includes(key));
  const fields = new Map(model.fields.map((spec) => [spec.key, spec]));
  assert.deepEqual(
    [...fields.keys()].sort(),
    properties.sort(),
    `${where} (${defName}): the JS table's fields differ from the schema's`,
  );
  const required = new Set(definition.required ?? []);
  for (const key of properties) {
    const property = definition.properties[key];
    const spec = fields.get(key);
    const at = `${where}.${key}`;
    assert.equal(spec.required, required.has(key), `${at}: required in one, not the other`);
    if (!required.has(key)) {
      if ("default" in property) {
        assert.equal(spec.factory, undefined, `${at}: the schema has a default, not a factory`);
        assert.deepEqual(spec.default, property.default, `${at}: a different default`);
      } else {
        // pydantic's default_factory: the schema names no value, only the type it makes.
        assert.equal(typeof spec.factory, "function", `${at}: needs a default factory`);
        const made = spec.factory();
        const expected = { object: {}, array: [] }[property.type];
        assert.deepEqual(made, expected, `${at}: the factory must make an empty ${property.type}`);
      }
    }
    const shape = shapeOf(property);
    assert.deepEqual(
      { ...shapeOfSpec(spec), parts: shape.parts ? null : undefined },
      { ...shape, parts: shape.parts ? null : undefined },
      `${at}: a different kind of field`,
    );
    if (shape.model) compareModel(shape.model, spec.model, at);
    if (shape.list) compareModel(shape.list, spec.model, at);
    if (shape.parts) compareParts(shape.parts, at);
  }
}

/** Content parts: every known part model matches; the schema's catch-all is OtherPart. */
function compareParts(names, where) {
  const known = names.filter((name) => name !== "OtherPart");
  assert.ok(names.includes("OtherPart"), `${where}: unknown part types must be kept`);
  assert.deepEqual(
    Object.values(CONTENT_PARTS)
      .map((part) => part.name)
      .sort(),
    known.sort(),
    `${where}: different content part types`,
  );
  for (const [type, part] of Object.entries(CONTENT_PARTS)) {
    assert.equal(ACTIONS.$defs[part.name].properties.type.const, type, `${where}: ${type}`);
    compareModel(part.name, part, `${where}[${type}]`);
  }
}

/** Each `oneOf` branch of the action schema: its type tag and the model of its data. */
function schemaActions() {
  const out = new Map();
  for (const branch of ACTIONS.oneOf) {
    const definition = ACTIONS.$defs[refName(branch.$ref)];
    const tag = definition.properties.type.const;
    if (tag === undefined) continue; // UnknownAction: any other type, reduced as seq only
    const data = refName(definition.properties.data.$ref);
    out.set(tag, { envelope: refName(branch.$ref), data });
  }
  return out;
}

test("the JS table knows exactly the action types of the schema", () => {
  const types = [...schemaActions().keys()].sort();
  assert.deepEqual(Object.keys(PAYLOADS).sort(), types);
  assert.deepEqual([...ACTION_TYPES].sort(), types);
});

for (const [type, { data }] of schemaActions()) {
  test(`${type}: fields, required-ness, defaults and nested models match ${data}`, () => {
    assert.ok(Object.hasOwn(PAYLOADS, type), `the JS table has no ${type}`);
    compareModel(data, PAYLOADS[type], `${type} data`);
  });
}

test("the envelope matches every action's schema (type and data aside)", () => {
  for (const [type, { envelope }] of schemaActions()) {
    const renamed = { ...ENVELOPE, name: envelope };
    compareModel(envelope, renamed, `${type} envelope`, { skip: ["type", "data"] });
    assert.deepEqual(ACTIONS.$defs[envelope].required.includes("data"), true);
  }
});

test("content parts are one table for messages and turn input", () => {
  const kindOf = (type, key) => PAYLOADS[type].fields.find((f) => f.key === key).kind;
  assert.equal(kindOf("message.added", "content"), CONTENT.kind);
  assert.equal(kindOf("turn.started", "input"), CONTENT.kind);
});

// -- the state the reducer builds ----------------------------------------------------------

/** Every object in `value` that the schema describes has exactly the schema's keys. */
function checkKeys(value, node, where) {
  if (value === null || node === undefined) return;
  if (node.$ref) return checkKeys(value, STATE.$defs[refName(node.$ref)], where);
  if (node.anyOf) {
    const branch = node.anyOf.find((b) => b.type !== "null");
    return checkKeys(value, branch, where);
  }
  if (Array.isArray(value)) {
    value.forEach((item, i) => checkKeys(item, node.items, `${where}[${i}]`));
    return;
  }
  if (typeof value !== "object") return;
  if (node.properties) {
    assert.deepEqual(
      Object.keys(value).sort(),
      Object.keys(node.properties).sort(),
      `${where}: the JS state's keys differ from ${node.title ?? "the schema"}`,
    );
    for (const [key, child] of Object.entries(node.properties)) {
      checkKeys(value[key], child, `${where}.${key}`);
    }
  } else if (node.additionalProperties && typeof node.additionalProperties === "object") {
    for (const [key, child] of Object.entries(value)) {
      checkKeys(child, node.additionalProperties, `${where}[${JSON.stringify(key)}]`);
    }
  }
}

test("the state the JS reducer builds has exactly the fields of state.schema.json", () => {
  checkKeys(initialState(), STATE, "initial state");
  const dir = new URL("../conformance/vectors/", import.meta.url);
  const seen = new Set();
  for (const name of readdirSync(dir).filter((n) => n.endsWith(".json"))) {
    const vector = JSON.parse(readFileSync(new URL(name, dir)));
    const stop = vector.expected_error?.index ?? vector.actions.length;
    // After every action, since some shapes (a model retry) are cleared again by the end.
    let state = initialState();
    for (const [index, action] of vector.actions.slice(0, stop).entries()) {
      state = replay([action], state);
      checkKeys(state, STATE, `${name} after action ${index}`);
      for (const turn of state.turns) {
        for (const key of ["messages", "reasoning", "tool_calls", "input_requests", "workers"]) {
          if (Object.keys(turn[key]).length) seen.add(key);
        }
        if (turn.model_retry) seen.add("model_retry");
      }
    }
  }
  // The vectors reach every kind of entity, so every nested shape above was compared.
  assert.deepEqual(
    [...seen].sort(),
    ["input_requests", "messages", "model_retry", "reasoning", "tool_calls", "workers"],
  );
});
