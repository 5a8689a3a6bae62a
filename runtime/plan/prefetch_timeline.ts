// The step time on a GPU with a copy engine beside its compute (the paper's setting, not WebGPU's
// one queue): prefetches are issued as early as they may be, so a copy hides behind every layer
// computed since it could start. Used to check our reading of OrbitFlow's Figure 3 and to say what
// overlap would buy; the planner itself minimizes latency_model.ts.
//
// Rules: one link, serving the prefetches in the order their layers need them (earliest deadline
// first); a request's next prefetch may start only once its previous host layer has computed (it
// reuses that request's part of the prefetch region); a layer starts when the layer before it has
// finished and its own prefetches have landed. The wait is the stall.
//
// The paper's Algorithm 1 splits the link evenly among the copies in flight instead. That split
// gives Figure 3's Placement C 6 and 7 stall units where the figure shows 0 and 2; serving the
// copy needed first gives the figure's numbers for every placement, so this follows the figure
// (figure3_test.ts).

import { isOffloaded, type Placed } from "../kv/offload_pattern.ts";

export interface Timeline {
  computeMs: number;
  stallMs: number;
  stepMs: number;
}

/**
 * @param layerMs one layer's compute
 * @param copyMs ms to prefetch `blocks` blocks of one request's layer
 */
export function prefetchTimeline(
  numLayers: number,
  batch: readonly Placed[],
  layerMs: number,
  copyMs: (blocks: number) => number,
): Timeline {
  const lastHostLayerEnd = batch.map(() => 0);
  let linkFree = 0, clock = 0, stallMs = 0;
  for (let l = 0; l < numLayers; l++) {
    let ready = clock;
    batch.forEach((r, i) => {
      if (!isOffloaded(r.distance, l)) return;
      const start = Math.max(linkFree, lastHostLayerEnd[i]);
      linkFree = start + copyMs(r.blocksPerLayer);
      ready = Math.max(ready, linkFree);
    });
    stallMs += ready - clock;
    clock = ready + layerMs;
    batch.forEach((r, i) => {
      if (isOffloaded(r.distance, l)) lastHostLayerEnd[i] = clock;
    });
  }
  const computeMs = numLayers * layerMs;
  return { computeMs, stallMs, stepMs: computeMs + stallMs };
}
