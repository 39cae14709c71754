export { Trellis, type TrellisOptions } from "./client.js";
export { TrellisError, type ErrorBody, type FieldErrors } from "./errors.js";
export { memoryStorage, type StorageLike } from "./persistence.js";
export type { Auth, SignInResult, SignUpResult } from "./auth.js";
export type { AuthEvent, AuthListener } from "./tokens.js";
export type {
  AggregateGroup,
  AggregateOptions,
  AggregateResult,
  Collection,
  GetOptions,
  ListOptions,
  ListResult,
  SubscribeOptions,
  WriteOptions,
} from "./collection.js";
export type { Grant, GrantRecord, Grants } from "./grants.js";
export type { FilterValue, Names, Operators, Where } from "./query.js";
export type { Change, ChangeKind } from "./changes.js";
export type { Live, RealtimeMode, Unsubscribe } from "./subscribe.js";
export type { ImageTransform, Storage, StoredFile, UploadInput, UploadOptions } from "./storage.js";
export type { Functions } from "./functions.js";
export type { GraphqlVariables } from "./graphql.js";
export type { PendingInvite, Team, TeamMember, TeamRole, Teams } from "./teams.js";
export type { RequestOptions } from "./http.js";
export type { Deleted, DocumentOf, NewDocument, SystemFields, TokenPair, User } from "./types.js";
