// A queue of messages a subscription's callback fills and a loop takes
// from, with a timeout per take and an AbortSignal.

import { AbortedError } from "./errors.js";

export const TIMEOUT: unique symbol = Symbol("timeout");

export class Queue<T> {
  private items: T[] = [];
  private head = 0;
  private waiter: ((v: T | typeof TIMEOUT) => void) | null = null;

  push(v: T): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w(v);
      return;
    }
    this.items.push(v);
  }

  get length(): number {
    return this.items.length - this.head;
  }

  /** The next item, or TIMEOUT after ms; rejects with AbortedError when signal aborts. */
  next(ms: number, signal?: AbortSignal): Promise<T | typeof TIMEOUT> {
    if (signal?.aborted) {
      return Promise.reject(new AbortedError("baton: aborted", { cause: signal.reason }));
    }
    if (this.head < this.items.length) {
      const v = this.items[this.head++];
      if (this.head > 1024 && this.head * 2 > this.items.length) {
        this.items = this.items.slice(this.head);
        this.head = 0;
      }
      return Promise.resolve(v);
    }
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const timer = setTimeout(() => {
        this.waiter = null;
        done();
        resolve(TIMEOUT);
      }, ms);
      const onAbort = () => {
        this.waiter = null;
        done();
        reject(new AbortedError("baton: aborted", { cause: signal?.reason }));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiter = (v) => {
        done();
        resolve(v);
      };
    });
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new AbortedError("baton: aborted", { cause: signal.reason }));
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AbortedError("baton: aborted", { cause: signal?.reason }));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
