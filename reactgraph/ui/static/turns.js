// A session's history read a page at a time, newest first, and grouped into its turns (a turn's checkpoints share
// `values.turn_id`). Opening a session reads one page however long the session is; earlier turns are read when
// asked for, and a turn cut by a page's edge is read to its start when it is shown.

import { api } from "./api.js";

export const HISTORY_PAGE = 60;  // checkpoints per request: a few turns of any graph

export class History {
  constructor(threadId) {
    this.threadId = threadId;
    this.checkpoints = [];  // read so far, newest first
    this.more = true;  // whether older checkpoints may be left to read
    this.turns = new Map();  // turn id → its checkpoints read so far, newest first (the map: newest turn first)
    this.reading = Promise.resolve();
  }

  /** Read the next (older) page; one read at a time, so two callers never read the same page twice. */
  next() {
    this.reading = this.reading.then(() => (this.more ? this.#read() : undefined));
    return this.reading;
  }

  async #read() {
    const oldest = this.checkpoints.at(-1);
    const page = await api(`threads/${encodeURIComponent(this.threadId)}/history`, {
      limit: HISTORY_PAGE, ...(oldest ? { before: { checkpoint_id: oldest.checkpoint_id } } : {}),
    });
    this.checkpoints.push(...page);
    this.more = page.length === HISTORY_PAGE;
    for (const checkpoint of page) {
      const turn = checkpoint.values?.turn_id;
      if (!turn) continue;
      if (!this.turns.has(turn)) this.turns.set(turn, []);
      this.turns.get(turn).push(checkpoint);
    }
  }

  /** Whether `turn` may have checkpoints not read yet: it is the oldest turn read, and there is more. */
  cut(turn) {
    return this.more && [...this.turns.keys()].at(-1) === turn;
  }

  /** Read pages until `turn` is whole; whether any was read. */
  async complete(turn) {
    let read = false;
    while (this.cut(turn)) {
      await this.next();
      read = true;
    }
    return read;
  }

  /** The checkpoint that stands for `turn`: its newest with a status (the turn's end, or an edit of it), else its
   * newest (a turn under way, or waiting for a person). A branch asked from the turn's first checkpoint starts
   * with a copy of it, newer but no end of this turn. */
  latest(turn) {
    const checkpoints = this.turns.get(turn) || [];
    return checkpoints.find((c) => c.values?.status) ?? checkpoints[0];
  }

  /** [turn id, its checkpoints newest first], the oldest turn first. */
  list() {
    return [...this.turns.entries()].reverse();
  }
}
