/**
 * A FIFO queue with two bounds: a number of items and a total size (bytes, usually). `push` refuses an item that
 * would break either bound instead of growing, so the caller must decide what a full queue means (drop, answer busy,
 * push back). It is a ring buffer: `shift` is O(1), where Array.prototype.shift is O(n) and would make a long queue
 * quadratic to drain.
 */
import { assert } from './assert.js'

export class BoundedQueue<T> {
  /** Slots are allocated once; a slot outside [head, head + count) holds undefined so nothing is kept alive. */
  private readonly slots: Array<T | undefined>
  private head = 0
  /** Invariant: 0 <= count <= itemsMax. */
  private count = 0
  /** Invariant: 0 <= size <= sizeMax, and size is the sum of sizeOf over the queued items. */
  private size = 0

  constructor(
    readonly itemsMax: number,
    readonly sizeMax: number,
    private readonly sizeOf: (item: T) => number,
  ) {
    assert(Number.isInteger(itemsMax) && itemsMax > 0, 'bounded queue itemsMax must be a positive integer')
    assert(sizeMax > 0, 'bounded queue sizeMax must be positive')
    this.slots = new Array<T | undefined>(itemsMax).fill(undefined)
  }

  get length(): number {
    return this.count
  }

  get totalSize(): number {
    return this.size
  }

  /** Appends `item`, or returns false and changes nothing when either bound would be exceeded. */
  push(item: T): boolean {
    const itemSize = this.sizeOf(item)
    assert(itemSize >= 0, 'bounded queue item size must be >= 0')
    if (this.count === this.itemsMax || this.size + itemSize > this.sizeMax) return false
    this.slots[(this.head + this.count) % this.itemsMax] = item
    this.count += 1
    this.size += itemSize
    return true
  }

  /** Removes and returns the oldest item. */
  shift(): T | undefined {
    if (this.count === 0) return undefined
    const item = this.slots[this.head] as T
    this.slots[this.head] = undefined
    this.head = (this.head + 1) % this.itemsMax
    this.count -= 1
    this.size -= this.sizeOf(item)
    return item
  }

  peek(): T | undefined {
    return this.count === 0 ? undefined : this.slots[this.head]
  }
}
