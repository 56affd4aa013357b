import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { rowIndexOf, type TreeRow, visibleRange } from './tree-layout.js';

/** Fixed row height: what makes virtualizing a tree of thousands of nodes this simple. */
const ROW_HEIGHT = 34;

interface TreeViewProps {
  rows: readonly TreeRow[];
  selectedId: string | null;
  onSelect: (nodeId: string) => void;
}

/**
 * The message tree as an ARIA tree, virtualized: only the rows in view (and a few around them)
 * are in the DOM. Keyboard: ↑/↓ previous/next row, ← parent, → first child, Home/End, PageUp/
 * PageDown; the selection follows, and the focused row is announced through
 * aria-activedescendant.
 */
export function TreeView({ rows, selectedId, onSelect }: TreeViewProps) {
  const viewport = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);
  const selectedIndex = selectedId === null ? -1 : rowIndexOf(rows, selectedId);

  useLayoutEffect(() => {
    const element = viewport.current;
    if (!element) return;
    const observer = new ResizeObserver(() => setHeight(element.clientHeight));
    observer.observe(element);
    setHeight(element.clientHeight);
    return () => observer.disconnect();
  }, []);

  // Keep the selected row in view when it changes (keyboard, a link, a head switch).
  useEffect(() => {
    const element = viewport.current;
    if (!element || selectedIndex < 0) return;
    const top = selectedIndex * ROW_HEIGHT;
    if (top < element.scrollTop) element.scrollTop = top;
    else if (top + ROW_HEIGHT > element.scrollTop + element.clientHeight) element.scrollTop = top + ROW_HEIGHT - element.clientHeight;
  }, [selectedIndex, rows]);

  const { start, end } = visibleRange(scrollTop, height, ROW_HEIGHT, rows.length);
  const pageRows = Math.max(1, Math.floor(height / ROW_HEIGHT) - 1);

  const onKeyDown = (event: KeyboardEvent) => {
    if (rows.length === 0) return;
    const at = Math.max(0, selectedIndex);
    const row = rows[at];
    let target: number | undefined;
    switch (event.key) {
      case 'ArrowDown':
        target = Math.min(rows.length - 1, selectedIndex + 1);
        break;
      case 'ArrowUp':
        target = Math.max(0, at - 1);
        break;
      case 'Home':
        target = 0;
        break;
      case 'End':
        target = rows.length - 1;
        break;
      case 'PageDown':
        target = Math.min(rows.length - 1, at + pageRows);
        break;
      case 'PageUp':
        target = Math.max(0, at - pageRows);
        break;
      case 'ArrowLeft':
        target = row?.node.parentId ? rowIndexOf(rows, row.node.parentId) : -1;
        break;
      case 'ArrowRight':
        // Children come right after their parent in the walk.
        target = row?.hasChildren ? at + 1 : -1;
        break;
      default:
        return;
    }
    event.preventDefault();
    const next = target === undefined || target < 0 ? undefined : rows[target];
    if (next) onSelect(next.node.id);
  };

  return (
    <div
      ref={viewport}
      class="tree"
      role="tree"
      aria-label="Message tree"
      tabIndex={0}
      aria-activedescendant={selectedIndex >= 0 ? rowDomId(selectedIndex) : undefined}
      onKeyDown={onKeyDown}
      onScroll={(event) => setScrollTop((event.currentTarget as HTMLDivElement).scrollTop)}
    >
      <div class="tree-canvas" style={{ height: `${rows.length * ROW_HEIGHT}px` }}>
        {rows.slice(start, end).map((row, offset) => (
          <TreeRowView key={row.node.id} row={row} index={start + offset} selected={start + offset === selectedIndex} onSelect={onSelect} />
        ))}
      </div>
    </div>
  );
}

function rowDomId(index: number): string {
  return `tree-row-${index}`;
}

function TreeRowView({
  row,
  index,
  selected,
  onSelect,
}: {
  row: TreeRow;
  index: number;
  selected: boolean;
  onSelect: (id: string) => void;
}) {
  const { node } = row;
  const isRoot = node.parentId === null;
  const role = isRoot ? 'root' : (node.role ?? '?');
  const text = isRoot ? 'conversation start' : (node.preview ?? '');
  const label = [
    `${role} ${node.id}`,
    row.isHead ? 'head' : '',
    row.branches ? `fork with ${row.branches} branches` : '',
    row.branchIndex ? `branch ${row.branchIndex}` : '',
    `state version ${node.stateVersion}`,
    text,
  ]
    .filter(Boolean)
    .join(', ');
  const classes = ['tree-row', selected && 'selected', row.onHeadPath && 'on-head-path', row.isHead && 'is-head'].filter(Boolean).join(' ');
  // The tree, not each row, takes focus and the keys (aria-activedescendant names the selected
  // row), as the ARIA tree pattern does; a click selects a row as the arrow keys would.
  return (
    // biome-ignore lint/a11y/useFocusableInteractive: see above.
    // biome-ignore lint/a11y/useKeyWithClickEvents: see above.
    <div
      id={rowDomId(index)}
      class={classes}
      role="treeitem"
      aria-level={row.level + 1}
      aria-selected={selected}
      aria-label={label}
      data-node-id={node.id}
      style={{ transform: `translateY(${index * ROW_HEIGHT}px)` }}
      onClick={() => onSelect(node.id)}
    >
      <span class="tree-graph" aria-hidden="true">
        {row.guides.map((guide, column) => (
          <span key={column} class={`guide guide-${guide}`} />
        ))}
        <span class={`node-cell${row.joinsAbove ? ' up' : ''}${row.hasChildren ? ' down' : ''}${row.branchIndex ? ' left' : ''}`}>
          <span class="dot" />
        </span>
      </span>
      <span class={`role role-${role.replace(/[^\w-]/g, '')}`}>{role}</span>
      <span class="snippet">{text}</span>
      <span class="row-badges">
        {row.isHead && <span class="badge badge-head">HEAD</span>}
        {row.branches > 0 && <span class="badge badge-fork">{row.branches} branches</span>}
        <span class="version" title="state version at this node">
          v{node.stateVersion}
        </span>
      </span>
    </div>
  );
}
