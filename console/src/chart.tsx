import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface Series {
  label: string;
  values: (number | null)[];
}

const kColors = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#0a7c86"];

// A time-series chart (uPlot): x in seconds since the epoch. `title` names it for screen readers,
// and the page shows the same numbers in a table.
export function TimeChart(props: { title: string; x: number[]; series: Series[]; height?: number }) {
  const el = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!el.current) return;
    const width = Math.max(320, el.current.clientWidth || 640);
    const opts: uPlot.Options = {
      width,
      height: props.height ?? 220,
      series: [
        {},
        ...props.series.map((s, i) => ({ label: s.label, stroke: kColors[i % kColors.length], width: 2 })),
      ],
      axes: [{}, {}],
      legend: { show: true },
    };
    const plot = new uPlot(opts, [props.x, ...props.series.map((s) => s.values)] as uPlot.AlignedData, el.current);
    return () => plot.destroy();
  }, [JSON.stringify(props.x), JSON.stringify(props.series)]);
  return (
    <figure class="chart">
      <figcaption>{props.title}</figcaption>
      <div ref={el} role="img" aria-label={props.title} data-points={props.x.length} />
    </figure>
  );
}
