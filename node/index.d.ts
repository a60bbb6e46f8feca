// TypeScript declarations for libdrl's Node.js addon (docs/node.md).

/** A decision's outcome, shaped as rate-limiter-flexible's RateLimiterRes. */
export class RateLimiterRes {
  constructor(remainingPoints?: number, msBeforeNext?: number,
    consumedPoints?: number, isFirstInDuration?: boolean);
  /** Requests of 1 point still allowed now. */
  remainingPoints: number;
  /** Allowed: ms until the quota is full again; denied: until this request could pass. */
  msBeforeNext: number;
  /** Points the limit counts now (a denied request consumes nothing). */
  consumedPoints: number;
  /** This request found the quota full. */
  isFirstInDuration: boolean;
  toJSON(): {
    remainingPoints: number; msBeforeNext: number;
    consumedPoints: number; isFirstInDuration: boolean;
  };
  toString(): string;
}

export type Algorithm = 'fixed_window' | 'sliding_window' | 'subwindow' |
  'token_bucket' | 'gcra' | 'sliding_log';

export interface RateLimiterDrlOptions {
  /** A libdrl store URI: memory:// (default), redis://, redis-cluster://, memcached://, ... */
  store?: string;
  /** Points per duration (default 4, as rate-limiter-flexible). */
  points?: number;
  /** Seconds (default 1); whole seconds or whole milliseconds. */
  duration?: number;
  /** Key namespace (default 'rlflx'), at most 128 bytes. */
  keyPrefix?: string;
  /** Default 'fixed_window' (rate-limiter-flexible's). */
  algorithm?: Algorithm;
  /** A whole libdrl spec, instead of points/duration/algorithm/onError (not with them). */
  spec?: string;
  /** What to do when the store fails (libdrl's on_error=). */
  onError?: 'deny' | 'allow' | 'local';
  /**
   * memcached:// decisions on workers only (token_bucket, gcra,
   * sliding_log, several limits, channels=0; the counters decide on the
   * loop): the consume()s of one tick are decided this many
   * (default 16, 1..1024) per worker hand-off, in call order; 1: each on
   * its own. A stalled server settles a batch's last after up to this
   * many times timeout_ms.
   */
  batch?: number;
}

/** An Error from the store or the library; code is libdrl's name ('DRL_ETIMEDOUT'). */
export interface DrlError extends Error {
  code: string;
}

export class RateLimiterDrl {
  constructor(opts?: RateLimiterDrlOptions);
  readonly spec: string;
  /** undefined when a spec was given */
  readonly points: number | undefined;
  /** undefined when a spec was given */
  readonly duration: number | undefined;
  readonly keyPrefix: string;
  /** Resolves once the store is open. */
  ready(): Promise<this>;
  /** Resolves when allowed; rejects with a RateLimiterRes when denied, with a DrlError on failure. */
  consume(key: string | Buffer, points?: number): Promise<RateLimiterRes>;
  /** The quota now, consuming nothing; null when none of it is used. */
  get(key: string | Buffer): Promise<RateLimiterRes | null>;
  /** Forget the key; resolves true. */
  delete(key: string | Buffer): Promise<boolean>;
  /** Consume points whatever the quota. */
  penalty(key: string | Buffer, points?: number): Promise<RateLimiterRes>;
  /** Give points back (never beyond a full quota). */
  reward(key: string | Buffer, points?: number): Promise<RateLimiterRes>;
}

/** The libdrl version the addon was built with. */
export const version: string;

/** Whether penalty() and reward() work: the libdrl loaded has drl_adjust(). */
export const hasAdjust: boolean;
