// Runs the official Socket.IO client and Apollo Client against a live Trellis server.
// Input (environment): TRELLIS_URL, TRELLIS_USER_TOKEN, TRELLIS_ROOM_ID, TRELLIS_MASTER_KEY.
// Output: one JSON line with what each client saw; the Python test asserts on it.
import { createHash } from "node:crypto";
import { ApolloClient, HttpLink, InMemoryCache, gql } from "@apollo/client";
import { PersistedQueryLink } from "@apollo/client/link/persisted-queries";
import { io } from "socket.io-client";

const url = process.env.TRELLIS_URL;
const deadline = setTimeout(() => { console.error("timed out"); process.exit(2); }, 30000);

async function socketCheck() {
  const socket = io(`${url}/chat/`, { path: "/realtime", auth: { token: process.env.TRELLIS_USER_TOKEN },
                                       transports: ["websocket"], reconnection: false });
  await new Promise((resolve, reject) => { socket.on("connect", resolve); socket.on("connect_error", reject); });
  const event = new Promise((resolve) => socket.on("message", resolve));
  const ack = await socket.timeout(10000).emitWithAck("message", process.env.TRELLIS_ROOM_ID, "hello from node");
  const pushed = await event;
  socket.disconnect();
  return { ack, pushed };
}

async function apolloCheck() {
  const client = new ApolloClient({
    link: new HttpLink({ uri: `${url}/graphql`, headers: { masterkey: process.env.TRELLIS_MASTER_KEY } }),
    cache: new InMemoryCache(),
  });
  const created = await client.mutate({
    mutation: gql`mutation Add($data: Note__Input!) { createNote(data: $data) { _id title stars } }`,
    variables: { data: { title: "from apollo", stars: 4 } },
  });
  const listed = await client.query({
    query: gql`query Rated($min: Float) { Note(where: { stars_gte: $min }, sort: "title") { _id title } }`,
    variables: { min: 3 },
    fetchPolicy: "network-only",
  });
  let failure = null;
  try {
    await client.query({ query: gql`query { Note { nothing } }`, fetchPolicy: "network-only" });
  } catch (error) {
    failure = { name: error.name, message: error.message, codes: (error.errors || []).map((e) => e.extensions?.code) };
  }
  return { created: created.data.createNote, listed: listed.data.Note, failure };
}

// Automatic persisted queries: the link sends the hash alone first, and the query when the server does not know it.
async function persistedCheck() {
  const sent = [];
  const logged = (uri, options) => {
    const body = JSON.parse(options.body);
    sent.push({ query: typeof body.query === "string", hash: Boolean(body.extensions?.persistedQuery?.sha256Hash) });
    return fetch(uri, options);
  };
  const sha256 = (text) => createHash("sha256").update(text).digest("hex");
  const client = new ApolloClient({
    link: new PersistedQueryLink({ sha256 }).concat(
      new HttpLink({ uri: `${url}/graphql`, headers: { masterkey: process.env.TRELLIS_MASTER_KEY }, fetch: logged }),
    ),
    cache: new InMemoryCache(),
  });
  const listed = await client.query({
    query: gql`query Titles { Note(sort: "title") { _id title } }`,
    fetchPolicy: "network-only",
  });
  return { listed: listed.data.Note, sent };
}

const result = { socket: await socketCheck(), apollo: await apolloCheck(), persisted: await persistedCheck() };
clearTimeout(deadline);
console.log(JSON.stringify(result));
