/**
 * A priority queue of simulated events ordered by (time, insertion order), so that two events at the same time
 * always come out in the order they were scheduled: part of what makes one seed give one trace.
 */
export class EventQueue<T> {
  private readonly times: number[] = []
  private readonly sequences: number[] = []
  private readonly items: T[] = []
  private nextSequence = 0

  get size(): number {
    return this.items.length
  }

  push(time: number, item: T): void {
    this.times.push(time)
    this.sequences.push(this.nextSequence++)
    this.items.push(item)
    this.siftUp(this.items.length - 1)
  }

  /** The earliest event, removed; undefined when empty. */
  pop(): { time: number; item: T } | undefined {
    if (this.items.length === 0) return undefined
    const time = this.times[0]!
    const item = this.items[0]!
    const last = this.items.length - 1
    this.swap(0, last)
    this.times.pop()
    this.sequences.pop()
    this.items.pop()
    if (this.items.length > 0) this.siftDown(0)
    return { time, item }
  }

  private before(a: number, b: number): boolean {
    const ta = this.times[a]!
    const tb = this.times[b]!
    return ta < tb || (ta === tb && this.sequences[a]! < this.sequences[b]!)
  }

  private siftUp(index: number): void {
    let child = index
    while (child > 0) {
      const parent = (child - 1) >> 1
      if (!this.before(child, parent)) return
      this.swap(child, parent)
      child = parent
    }
  }

  private siftDown(index: number): void {
    let parent = index
    const count = this.items.length
    for (;;) {
      const left = parent * 2 + 1
      const right = left + 1
      let smallest = parent
      if (left < count && this.before(left, smallest)) smallest = left
      if (right < count && this.before(right, smallest)) smallest = right
      if (smallest === parent) return
      this.swap(parent, smallest)
      parent = smallest
    }
  }

  private swap(a: number, b: number): void {
    if (a === b) return
    ;[this.times[a], this.times[b]] = [this.times[b]!, this.times[a]!]
    ;[this.sequences[a], this.sequences[b]] = [this.sequences[b]!, this.sequences[a]!]
    ;[this.items[a], this.items[b]] = [this.items[b]!, this.items[a]!]
  }
}
