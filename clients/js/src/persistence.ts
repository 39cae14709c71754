/** Where the SDK keeps what must outlive a call: the sign-in session and the addresses of unfinished uploads.
 * Anything shaped like `localStorage` works, synchronous or returning promises (React Native's
 * AsyncStorage, an encrypted store, a file in Node). */
export interface StorageLike {
  getItem(key: string): string | null | Promise<string | null>;
  setItem(key: string, value: string): void | Promise<void>;
  removeItem(key: string): void | Promise<void>;
}

/** Kept in memory: gone when the process ends (the default in Node). */
export function memoryStorage(): StorageLike {
  const items = new Map<string, string>();
  return {
    getItem: (key) => items.get(key) ?? null,
    setItem: (key, value) => void items.set(key, value),
    removeItem: (key) => void items.delete(key),
  };
}

/** The browser's localStorage when there is one that works (private modes may refuse writes), else memory. */
export function defaultStorage(): StorageLike {
  try {
    const local = globalThis.localStorage;
    if (local !== undefined) {
      const probe = "trellis:probe";
      local.setItem(probe, probe);
      local.removeItem(probe);
      return local;
    }
  } catch {
    // no usable localStorage: fall through
  }
  return memoryStorage();
}

export async function readJson<T>(storage: StorageLike, key: string): Promise<T | null> {
  const text = await storage.getItem(key);
  if (text === null) return null;
  try {
    return JSON.parse(text) as T;
  } catch {
    return null; // written by something else: as if absent
  }
}

export async function writeJson(storage: StorageLike, key: string, value: unknown): Promise<void> {
  if (value === null || value === undefined) await storage.removeItem(key);
  else await storage.setItem(key, JSON.stringify(value));
}
