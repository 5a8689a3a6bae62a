// VACANT table entries: positions whose block was freed and that grow() gives a block again (the
// oldest ones eLLM's partial drop frees, or those after blocks aliased across layers). Apart from
// the pool (block_pool.ts) so the pool's file stays about its blocks.

/** In a table: an entry whose block was freed and that grow() gives a block again. */
export const VACANT = -1;

/** VACANT entries of a table: its oldest, or those after entries shared across its layers. */
export function dropsIn(table: readonly number[]): number {
  let drops = 0; // a loop, not a filter: shortfall() counts every table's on each admission test
  for (const b of table) if (b === VACANT) drops++;
  return drops;
}
