/** The result of one job inside a committed batch: a job can fail alone while the rest commit. */
export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

interface Queued<J, R> {
  job: J;
  resolve: (value: R) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: jobs submitted while the event loop is busy are collected and handed to `commit` together,
 * which runs them in ONE transaction. A job's promise settles only after that transaction has committed
 * (or failed as a whole), so batching never weakens durability.
 */
export class GroupCommit<J, R> {
  private queue: Queued<J, R>[] = [];
  private scheduled = false;
  private urgentQueued = false;

  constructor(
    /** Runs the jobs in one transaction and returns one outcome per job, in order; throws if the transaction fails. */
    private readonly commit: (jobs: J[]) => Outcome<R>[],
    /** Size of a job (e.g. its event count), to bound how much one transaction holds the event loop. */
    private readonly weight: (job: J) => number,
    private readonly maxWeight: number,
  ) {}

  /**
   * `urgent`: commit at the end of the current callback (process.nextTick), taking along everything
   * queued so far, rather than in the check phase after all of this turn's I/O callbacks. Under load
   * that turn holds many callbacks, and a run's end is what clients and webhooks wait for.
   */
  submit(job: J, urgent = false): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.schedule();
      if (urgent && !this.urgentQueued) {
        this.urgentQueued = true;
        process.nextTick(() => {
          this.urgentQueued = false;
          this.runBatch();
        });
      }
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate (not a microtask) lets every append issued in this turn of the event loop, and the I/O
    // callbacks that are ready now, join the batch.
    setImmediate(() => {
      this.scheduled = false;
      this.runBatch();
      if (this.queue.length > 0) this.schedule();
    });
  }

  /** Commits everything queued now, synchronously. */
  flushAll(): void {
    while (this.queue.length > 0) this.runBatch();
  }

  get pending(): number {
    return this.queue.length;
  }

  private runBatch(): void {
    if (this.queue.length === 0) return;
    let weight = 0;
    let count = 0;
    while (count < this.queue.length && (count === 0 || weight + this.weight(this.queue[count].job) <= this.maxWeight)) {
      weight += this.weight(this.queue[count].job);
      count++;
    }
    const batch = this.queue.splice(0, count);
    let outcomes: Outcome<R>[];
    try {
      outcomes = this.commit(batch.map((q) => q.job));
    } catch (error) {
      for (const q of batch) q.reject(error);
      return;
    }
    batch.forEach((q, i) => {
      const outcome = outcomes[i];
      if (outcome.ok) q.resolve(outcome.value);
      else q.reject(outcome.error);
    });
  }
}
