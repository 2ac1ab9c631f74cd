/**
 * Lets at most `perTurn` callers through in one turn of the event loop; the others wait, in order, for the
 * next turns (one `setImmediate` a turn), `perTurn` at a time. Work that one commit releases all at once (the
 * graphs of hundreds of runs claimed together, each a long chain of microtasks) then runs in slices with
 * the loop's I/O between them, instead of holding the loop for one long stretch in which no request is
 * read and no answer leaves.
 */
export class TurnGate {
  private readonly waiting: (() => void)[] = [];
  private passedThisTurn = 0;
  private turnScheduled = false;

  constructor(private readonly perTurn: number) {
    if (!Number.isInteger(perTurn) || perTurn < 1) throw new RangeError(`perTurn must be a positive integer, not ${perTurn}`);
  }

  /** Undefined when the caller may go on now; else a promise that resolves in the turn that lets it through. */
  pass(): Promise<void> | undefined {
    this.scheduleTurn();
    if (this.waiting.length === 0 && this.passedThisTurn < this.perTurn) {
      this.passedThisTurn++;
      return undefined;
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Callers waiting for a later turn. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Ends this turn's count at the next check phase (an immediate scheduled during one runs in the loop's next turn). */
  private scheduleTurn(): void {
    if (this.turnScheduled) return;
    this.turnScheduled = true;
    setImmediate(() => {
      this.turnScheduled = false;
      const through = this.waiting.splice(0, this.perTurn);
      this.passedThisTurn = through.length;
      for (const resolve of through) resolve();
      // Counted against the turn that begins with this one's promises settled; reset again at its end.
      if (through.length > 0 || this.waiting.length > 0) this.scheduleTurn();
    });
  }
}
