// Documents: list with every option, get, create, createMany, update, replace, delete, aggregate, scope, and
// sharing one document with grants.
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { TrellisError } from "trellis-client";
import { configure, createSchema, signedUp, unique } from "./helpers.mjs";

const Person = unique("Person");
const Task = unique("Task");
let t;
let tasks;
let ann;
let bob;

before(async () => {
  await createSchema(Person, { name: { type: "String", required: true } });
  await createSchema(Task, {
    title: { type: "String", required: true, searchable: true },
    done: { type: "Boolean", default: false },
    points: "Number",
    tags: ["String"],
    due: "Date",
    assignee: { type: "Relation", model: Person },
  });
  ({ t } = await signedUp());
  tasks = t.collection(Task);
  const people = t.collection(Person);
  ann = await people.create({ name: "Ann" });
  bob = await people.create({ name: "Bob" });
  await tasks.createMany([
    { title: "Write the report", points: 5, tags: ["work"], due: "2026-01-10T09:00:00Z", assignee: ann._id },
    { title: "Buy milk", points: 1, tags: ["home"], done: true, due: "2026-01-03T09:00:00Z", assignee: bob._id },
    { title: "Fix the bike", points: 3, tags: ["home", "sport"], due: "2026-02-01T09:00:00Z", assignee: ann._id },
    { title: "Plan the trip", points: 8, tags: ["home"] },
  ]);
});

test("create answers the stored document; get reads it, with populate and select", async () => {
  const created = await tasks.create({ title: "Call the bank", points: 2, assignee: bob._id });
  assert.match(created._id, /^[0-9a-f]{32}$/);
  assert.equal(created.title, "Call the bank");
  assert.equal(created.done, false); // the schema's default
  assert.ok(created.createdAt && created.updatedAt);
  assert.deepEqual(await tasks.get(created._id), created);
  const populated = await tasks.get(created._id, { populate: "assignee" });
  assert.equal(populated.assignee.name, "Bob");
  assert.deepEqual(await tasks.get(created._id, { select: ["title"] }), { _id: created._id, title: "Call the bank" });
  await tasks.delete(created._id);
});

test("createMany stores every document at once, or none", async () => {
  const made = await tasks.createMany([{ title: "One" }, { title: "Two" }]);
  assert.deepEqual(made.map((doc) => doc.title), ["One", "Two"]);
  await assert.rejects(tasks.createMany([{ title: "Three" }, { points: 4 }]), (error) => {
    assert.ok(error instanceof TrellisError);
    assert.equal(error.status, 400);
    assert.deepEqual(Object.keys(error.errors.docs), ["1"], JSON.stringify(error.errors));
    return true;
  });
  assert.equal((await tasks.list({ where: { title: "Three" } })).count, 0);
  for (const doc of made) await tasks.delete(doc._id);
});

test("update changes some fields (PATCH), replace the whole document (PUT), delete removes it", async () => {
  const doc = await tasks.create({ title: "Paint", points: 4, tags: ["home"] });
  const updated = await tasks.update(doc._id, { done: true, tags: null });
  assert.equal(updated.done, true);
  assert.equal(updated.points, 4);
  assert.equal("tags" in updated, false);
  const replaced = await tasks.replace(doc._id, { title: "Paint the fence" });
  assert.equal(replaced.title, "Paint the fence");
  assert.equal("points" in replaced, false);
  assert.equal(replaced.done, false); // defaults apply again
  assert.deepEqual(await tasks.delete(doc._id), { _id: doc._id, deleted: true });
  await assert.rejects(tasks.get(doc._id), { name: "NOT_FOUND", status: 404 });
});

test("list filters with where, sorts, pages and counts", async () => {
  const cheap = await tasks.list({ where: { points: { $lt: 5 } }, sort: "points" });
  assert.deepEqual(cheap.documents.map((doc) => doc.title), ["Buy milk", "Fix the bike"]);
  assert.equal(cheap.count, 2);

  const home = await tasks.list({ where: { tags: "home", done: false }, sort: ["-points"] });
  assert.deepEqual(home.documents.map((doc) => doc.title), ["Plan the trip", "Fix the bike"]);

  const some = await tasks.list({ where: { points: { $in: [1, 8] } }, sort: "title" });
  assert.deepEqual(some.documents.map((doc) => doc.title), ["Buy milk", "Plan the trip"]);
  const text = await tasks.list({ where: { title: { $contains: "THE" }, due: { $exists: true } }, sort: "title" });
  assert.deepEqual(text.documents.map((doc) => doc.title), ["Fix the bike", "Write the report"]);
  const january = await tasks.list({
    where: { $and: [{ due: { $gte: new Date("2026-01-01T00:00:00Z") } }, { due: { $lt: new Date("2026-02-01T00:00:00Z") } }] },
    sort: "due",
  });
  assert.deepEqual(january.documents.map((doc) => doc.title), ["Buy milk", "Write the report"]);

  const page = await tasks.list({ sort: "title", skip: 1, limit: 2 });
  assert.deepEqual(page.documents.map((doc) => doc.title), ["Fix the bike", "Plan the trip"]);
  assert.equal(page.count, 4);
  const uncounted = await tasks.list({ sort: "title", limit: 1, count: false });
  assert.equal("count" in uncounted, false);
  assert.equal(uncounted.documents.length, 1);
});

test("list with search, populate and select", async () => {
  const found = await tasks.list({ search: "bik" });
  assert.deepEqual(found.documents.map((doc) => doc.title), ["Fix the bike"]);
  const shaped = await tasks.list({ where: { title: "Write the report" }, populate: ["assignee"], select: "title,assignee" });
  assert.equal(shaped.documents.length, 1);
  assert.equal(shaped.documents[0].assignee.name, "Ann");
  assert.deepEqual(Object.keys(shaped.documents[0]).sort(), ["_id", "assignee", "title"]);
});

test("aggregate groups and computes, with where ($or included)", async () => {
  const byDone = await tasks.aggregate({ groupBy: "done", count: true, sum: "points", sort: "-count" });
  assert.equal(byDone.count, 2);
  assert.deepEqual(byDone.groups, [
    { key: { done: false }, count: 3, sum: { points: 16 } },
    { key: { done: true }, count: 1, sum: { points: 1 } },
  ]);
  const either = await tasks.aggregate({ count: true, max: ["points"], where: { $or: [{ done: true }, { points: { $gte: 8 } }] } });
  assert.deepEqual(either.groups, [{ key: {}, count: 2, max: { points: 8 } }]);
});

test("grants: share one document with another user and take it back; scope: a team owns what it creates", async () => {
  const Note = unique("Note");
  await createSchema(Note, { text: "String" }, { conduit: { authorization: { enabled: true } } });
  await configure("authentication", { teams: { enabled: true } });
  const owner = await signedUp();
  const friend = await signedUp();
  const notes = owner.t.collection(Note);
  const theirs = friend.t.collection(Note);
  const note = await notes.create({ text: "groceries" });
  await assert.rejects(theirs.get(note._id), { name: "NOT_FOUND", status: 404 });

  const grants = notes.grants(note._id);
  assert.deepEqual(await grants.list(), { grants: [{ subject: `User:${owner.id}`, relation: "owner" }], count: 1 });
  const added = await grants.add(`User:${friend.id}`, "reader");
  assert.deepEqual(added, { subject: `User:${friend.id}`, relation: "reader", resource: `${Note}:${note._id}` });
  assert.equal((await theirs.get(note._id)).text, "groceries");
  assert.equal((await theirs.list()).count, 1);
  await assert.rejects(theirs.update(note._id, { text: "mine now" }), { name: "FORBIDDEN", status: 403 });
  await grants.remove(`User:${friend.id}`, "reader");
  await assert.rejects(theirs.get(note._id), { status: 404 });

  const team = await owner.t.teams.create(unique("team"));
  const scope = `Team:${team._id}`;
  const shared = await notes.create({ text: "team plan" }, { scope });
  assert.deepEqual((await notes.grants(shared._id).list()).grants, [{ subject: scope, relation: "owner" }]);
  const inScope = await notes.list({ scope });
  assert.deepEqual(inScope.documents.map((doc) => doc.text), ["team plan"]);
  assert.equal((await notes.update(shared._id, { text: "team plan v2" }, { scope })).text, "team plan v2");
  assert.equal((await notes.replace(shared._id, { text: "v3" }, { scope })).text, "v3");
  assert.equal((await notes.get(shared._id, { scope })).text, "v3");
  assert.equal((await notes.aggregate({ count: true, scope })).groups[0].count, 1);
  await assert.rejects(theirs.list({ scope }), { name: "FORBIDDEN", status: 403 });
  assert.deepEqual(await notes.delete(shared._id, { scope }), { _id: shared._id, deleted: true });
});
