/** Shapes the server answers with, shared by several parts of the SDK. */

/** A user as `GET /authentication/user` shows it (fields an administrator added travel along). */
export interface User {
  _id: string;
  email: string | null;
  isActive: boolean;
  isVerified: boolean;
  phoneNumber: string | null;
  twoFaEnabled: boolean;
  providers: string[];
  createdAt: string;
  updatedAt: string;
  [field: string]: unknown;
}

/** The token pair of a sign-in or a renew. */
export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  userId: string;
}

/** Fields the server sets on every document. */
export interface SystemFields {
  _id: string;
  createdAt?: string;
  updatedAt?: string;
  __v?: number;
}

/** A stored document of type `T` (the fields of a schema, e.g. from `flask trellis types --lang ts`), with the
 * server's own fields whether or not `T` declares them. */
export type DocumentOf<T> = T & SystemFields;

/** What a client sends to create or replace a document: the fields, without the server's own. */
export type NewDocument<T> = Omit<T, keyof SystemFields>;

/** `{_id, deleted: true}`: the answer of a delete. */
export interface Deleted {
  _id: string;
  deleted: true;
}

/** Something to wait for, or a value already there. */
export type MaybePromise<T> = T | Promise<T>;
