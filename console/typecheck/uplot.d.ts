// What the console uses of the vendored uPlot (console/web/assets/vendor/uplot),
// which index.html loads as the global uPlot before the modules.

interface UPlotSeries {
  label?: string;
  fill?: string;
  stroke?: string;
  width?: number;
  dash?: number[];
  spanGaps?: boolean;
  paths?: UPlotPaths;
  points?: { show?: boolean; size?: number; fill?: string };
}

interface UPlotAxis {
  show?: boolean;
  stroke?: string;
  size?: number;
  grid?: { stroke?: string; width?: number };
  ticks?: { stroke?: string; width?: number };
}

interface UPlotScale {
  time?: boolean;
  range?: (u: UPlot, min: number, max: number) => [number, number];
}

interface UPlotOptions {
  width: number;
  height: number;
  legend?: { show?: boolean };
  cursor?: { show?: boolean; drag?: { x?: boolean; y?: boolean }; points?: { show?: boolean } };
  scales?: Record<string, UPlotScale>;
  axes?: UPlotAxis[];
  series: UPlotSeries[];
}

/** A path builder, such as uPlot.paths.bars(). */
type UPlotPaths = (...args: unknown[]) => unknown;

/** One chart. */
interface UPlot {
  readonly root: HTMLElement;
  readonly over: HTMLElement;
  readonly cursor: { idx?: number | null; top?: number | null };
  posToVal(pos: number, scale: string): number;
  setSize(size: { width: number; height: number }): void;
  destroy(): void;
}

interface UPlotConstructor {
  new (opts: UPlotOptions, data: Array<Array<number | null>>, target: HTMLElement): UPlot;
  paths: { bars(opts: { size: [number, number] }): UPlotPaths };
}

/** Absent when the vendored script did not load. */
declare var uPlot: UPlotConstructor | undefined;
