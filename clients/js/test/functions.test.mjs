// Functions (`POST /functions/{name}`, from the functions folder tests/test_js_client.py gives the server) and
// GraphQL.
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { TrellisError } from "trellis-client";
import { client, createSchema, signedUp, unique } from "./helpers.mjs";

const Book = unique("Book");
before(() => createSchema(Book, { title: { type: "String", required: true }, pages: "Number" }));

test("functions.call answers the function's result", async () => {
  const { t, id } = await signedUp();
  assert.deepEqual(await t.functions.call("add", { a: 2, b: 3 }), { sum: 5, user: id });
  assert.equal(await t.functions.call("hello"), "hello, anyone");
});

test("a function's refusal is a TrellisError with the server's fields", async () => {
  const { t } = await signedUp();
  await assert.rejects(t.functions.call("refuse", { day: "sunday" }), (error) => {
    assert.ok(error instanceof TrellisError);
    assert.match(error.requestId, /^\w+$/);
    assert.deepEqual({ ...error.toJSON(), requestId: undefined }, {
      requestId: undefined,
      name: "INVALID_ARGUMENTS",
      status: 422,
      message: "closed on sunday",
      errors: { day: ["closed"] },
    });
    return true;
  });
  await assert.rejects(client().functions.call("add", { a: 1, b: 1 }), { name: "UNAUTHORIZED", status: 401 });
  await assert.rejects(t.functions.call("nothing-of-that-name"), { name: "NOT_FOUND", status: 404 });
});

test("graphql runs mutations and queries with variables", async () => {
  const { t } = await signedUp();
  const created = await t.graphql(`mutation Add($data: ${Book}__Input!) { create${Book}(data: $data) { _id title pages } }`, {
    data: { title: "Dune", pages: 412 },
  });
  assert.equal(created[`create${Book}`].title, "Dune");
  const listed = await t.graphql(`query Long($min: Float) { ${Book}(where: { pages_gte: $min }) { title } }`, { min: 400 });
  assert.deepEqual(listed, { [Book]: [{ title: "Dune" }] });
  assert.deepEqual(await t.graphql(`{ ${Book}(where: { pages_lt: 10 }) { title } }`), { [Book]: [] });
});

test("a GraphQL error is a TrellisError with the error's code", async () => {
  const { t } = await signedUp();
  await assert.rejects(t.graphql(`{ ${Book} { nothing } }`), (error) => {
    assert.ok(error instanceof TrellisError);
    assert.equal(error.name, "GRAPHQL_VALIDATION_FAILED");
    assert.equal(error.status, 400);
    assert.match(error.message, /nothing/);
    return true;
  });
  await assert.rejects(t.graphql(`mutation { create${Book}(data: { pages: 3 }) { _id } }`), (error) => {
    assert.ok(error instanceof TrellisError);
    assert.equal(error.status, 400);
    return true;
  });
});
