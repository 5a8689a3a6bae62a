// A set whose members each have an age (a number, smaller is older; no two members share one)
// that names its oldest member in amortised O(log n): a binary min-heap with lazy deletion. The
// prefix index keeps one per kind of eviction candidate (kv/prefix_eviction.ts), where scanning
// every entry in least-recently-used order for the first of a kind cost O(entries) per eviction.
//
// Removing a member or changing its age leaves its old pair in the heap; a pair counts only while
// its member still has that age. Stale pairs are dropped as they reach the top, and the heap is
// rebuilt from the members when they outnumber them (members that go idle and busy again without
// being used push a pair each time).

export class OldestFirst<T> {
  private readonly ages = new Map<T, number>();
  private heapAges: number[] = [];
  private heapItems: T[] = [];

  get size(): number {
    return this.ages.size;
  }

  has(item: T): boolean {
    return this.ages.has(item);
  }

  /** Adds `item` at `age`, or moves it there. */
  set(item: T, age: number): void {
    if (this.ages.get(item) === age) return;
    this.ages.set(item, age);
    if (this.heapAges.length > 2 * this.ages.size + 32) this.rebuild();
    else this.push(age, item);
  }

  delete(item: T): void {
    this.ages.delete(item);
  }

  /** The member of the smallest age, or undefined when there is none. */
  oldest(): T | undefined {
    while (this.heapAges.length > 0) {
      const item = this.heapItems[0];
      if (this.ages.get(item) === this.heapAges[0]) return item;
      this.pop();
    }
    return undefined;
  }

  private push(age: number, item: T): void {
    const ages = this.heapAges, items = this.heapItems;
    let i = ages.length;
    ages.push(age);
    items.push(item);
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (ages[up] <= age) break;
      ages[i] = ages[up];
      items[i] = items[up];
      i = up;
    }
    ages[i] = age;
    items[i] = item;
  }

  private pop(): void {
    const ages = this.heapAges, items = this.heapItems;
    const age = ages.pop()!, item = items.pop()!;
    if (ages.length > 0) this.siftDown(0, age, item);
  }

  /** Puts `age`/`item` at `i` or below, where the smaller child keeps moving up. */
  private siftDown(i: number, age: number, item: T): void {
    const ages = this.heapAges, items = this.heapItems, n = ages.length;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && ages[child + 1] < ages[child]) child++;
      if (ages[child] >= age) break;
      ages[i] = ages[child];
      items[i] = items[child];
      i = child;
    }
    ages[i] = age;
    items[i] = item;
  }

  /** A heap of the members alone (Floyd's heapify, O(n)). */
  private rebuild(): void {
    this.heapAges = [...this.ages.values()];
    this.heapItems = [...this.ages.keys()];
    for (let i = (this.heapAges.length >> 1) - 1; i >= 0; i--) {
      this.siftDown(i, this.heapAges[i], this.heapItems[i]);
    }
  }
}
