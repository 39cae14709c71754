// Compiled (not run) by `npm run typecheck` against the built declarations: the SDK's calls are typed by the
// schema's interface, and misuse does not compile (each @ts-expect-error must meet an error).
import { type Change, Trellis, TrellisError, type User, memoryStorage } from "trellis-client";

/** As `flask trellis types --lang ts` writes a schema's interface. */
interface Task {
  _id: string;
  title: string;
  done: boolean;
  points?: number;
  tags?: string[];
  due?: string;
  createdAt: string;
  updatedAt: string;
}

const t = new Trellis("http://127.0.0.1:3000", { storage: memoryStorage(), realtime: "auto" });
const tasks = t.collection<Task>("Task");

export async function typed(): Promise<void> {
  const page = await tasks.list({
    where: { done: false, points: { $gte: 3, $in: [1, 2] }, tags: "home", due: { $lt: new Date() }, $and: [{ title: { $contains: "a" } }] },
    sort: ["-points", "title"],
    populate: "assignee",
  });
  const title: string = page.documents[0]?.title ?? "";
  const total: number = page.count;
  const uncounted = await tasks.list({ count: false });
  // @ts-expect-error: no count was asked for
  void uncounted.count;
  // @ts-expect-error: not a field of Task
  await tasks.list({ where: { colour: "red" } });
  // @ts-expect-error: a Boolean field compares with booleans
  await tasks.list({ where: { done: "yes" } });

  const created = await tasks.create({ title, done: false });
  const id: string = created._id;
  // @ts-expect-error: title is required
  await tasks.create({ done: true });
  // @ts-expect-error: the server sets _id
  await tasks.create({ _id: "x", title: "x", done: false });
  await tasks.update(id, { done: true });
  await tasks.replace(id, { title: "y", done: false, points: total });
  const many: Task[] = await tasks.createMany([{ title: "a", done: false }]);
  const removed: true = (await tasks.delete(id)).deleted;
  const groups = await tasks.aggregate({ groupBy: "done", count: true, sum: ["points"] });
  const firstCount: number | undefined = groups.groups[0]?.count;
  const grants = await tasks.grants(id).list();
  const relation: string | undefined = grants.grants[0]?.relation;

  const unsubscribe = tasks.subscribe({ where: { $or: [{ done: true }, { points: 1 }] }, events: ["create", "leave"] }, (change: Change<Task>) => {
    if (change.event === "create") {
      const done: boolean = change.document.done;
      void done;
    } else if (change.event === "delete") {
      // @ts-expect-error: a delete carries only the _id
      void change.document.title;
    }
  });
  const accepted: Promise<void> = unsubscribe.ready;
  void accepted;
  unsubscribe();

  const signIn = await t.auth.signIn("a@example.com", "password");
  const user: User | null = signIn.twoFactor ? await t.auth.verifyTwoFactor("123456") : signIn.user;
  const file = await t.storage.upload(new Uint8Array(3), { isPublic: true, onProgress: (sent: number, size: number) => void [sent, size] });
  // @ts-expect-error: not a format the server makes
  await t.storage.url(file._id, { format: "gif" });
  const sum: number = await t.functions.call<number>("total", { values: [1, 2] });
  const data = await t.graphql<{ Task: { title: string }[] }>("{ Task { title } }");
  const team = await t.teams.create("Design");
  const members = await t.teams.members(team._id);
  try {
    await t.teams.accept("token");
  } catch (error) {
    if (error instanceof TrellisError) void [error.name, error.status, error.message, error.errors];
  }
  void [many, removed, firstCount, relation, user, sum, data.Task[0]?.title, members.members[0]?.role];
}
