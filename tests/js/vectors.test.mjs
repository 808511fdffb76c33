// Every conformance vector, three ways, against the web reducer: live one action at a time,
// replay from zero, snapshot + tail at every split. Mirrors tests/conformance/test_vectors.py;
// each result must be byte-identical to the canonical JSON of the vector's expected_state.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { canonicalJson } from "../../src/opennua/web/canonical.js";
import {
  ACTION_TYPES,
  SequenceGap,
  initialState,
  reduce,
  replay,
  stateFromJson,
  stateToJson,
} from "../../src/opennua/web/reducer.js";

const VECTOR_DIR = fileURLToPath(new URL("../conformance/vectors/", import.meta.url));
const FILES = readdirSync(VECTOR_DIR)
  .filter((name) => name.endsWith(".json"))
  .sort();

function load(name) {
  return JSON.parse(readFileSync(join(VECTOR_DIR, name), "utf-8"));
}

// A fresh parse per run, so no run can see objects another run handed to the reducer.
function rawActions(vector) {
  return vector.actions.map((action) => JSON.stringify(action));
}

/** Apply raw JSON actions from `start`, checking a declared gap where it occurs. */
function run(raw, state, start, vector) {
  const error = vector.expected_error;
  for (let index = start; index < raw.length; index++) {
    const action = JSON.parse(raw[index]);
    if (error !== undefined && index === error.index) {
      const before = stateToJson(state);
      assert.throws(
        () => reduce(state, action),
        (caught) => caught instanceof SequenceGap && caught.expected === error.expected_seq,
      );
      assert.equal(stateToJson(state), before, "a gap must not change the state");
      return state;
    }
    state = reduce(state, action);
  }
  assert.equal(error, undefined, "the declared gap never happened");
  return state;
}

test("there are enough vectors, covering every action type", () => {
  assert.ok(FILES.length >= 30, `only ${FILES.length} vectors in ${VECTOR_DIR}`);
  const seen = new Set(FILES.flatMap((name) => load(name).actions.map((action) => action.type)));
  const missing = ACTION_TYPES.filter((type) => !seen.has(type));
  assert.deepEqual(missing, [], `no vector uses ${missing.join(", ")}`);
});

for (const name of FILES) {
  describe(name.replace(/\.json$/, ""), () => {
    const vector = load(name);
    const raw = rawActions(vector);
    const expected = canonicalJson(vector.expected_state);

    test("live, one action at a time", () => {
      const state = run(raw, initialState(), 0, vector);
      assert.equal(stateToJson(state), expected);
    });

    test("replay from zero", () => {
      const actions = raw.map((text) => JSON.parse(text));
      let state;
      if (vector.expected_error !== undefined) {
        const index = vector.expected_error.index;
        state = replay(actions.slice(0, index));
        assert.throws(() => replay(actions.slice(index), state), SequenceGap);
      } else {
        state = replay(actions);
      }
      assert.equal(stateToJson(state), expected);
    });

    test("snapshot plus tail at every split", () => {
      const stop = vector.expected_error?.index ?? raw.length;
      for (let split = 0; split <= stop; split++) {
        const head = run(raw.slice(0, split), initialState(), 0, { actions: [] });
        const snapshot = stateToJson(head);
        const resumed = stateFromJson(snapshot);
        assert.equal(stateToJson(resumed), snapshot, `snapshot at ${split} does not round-trip`);
        const state = run(raw, resumed, split, vector);
        assert.equal(stateToJson(state), expected, `differs when split at ${split}`);
      }
    });
  });
}
