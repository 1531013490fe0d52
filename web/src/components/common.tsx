// Small pieces the pages share: the state element and the confirmation
// dialog. (Keeping a page live is src/live.ts.)
import { useEffect, useRef } from "preact/hooks";

// A node's or allocation's state: the API's value is the element's whole
// text (browser tests and screen readers read it as is); colour comes from
// the class only.
export function State(props: { value: string | null | undefined }) {
  const v = props.value ?? "unknown";
  return <span class={`state state-${v.replace(/[^a-z_]/g, "")}`}>{v}</span>;
}

// A modal confirmation (<dialog>: focus moves into it, Esc cancels). Rendered
// only while `open`.
export function Confirm(props: {
  open: boolean;
  title: string;
  children: preact.ComponentChildren;
  confirmLabel: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d === null) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onCancel={props.onCancel} class="confirm">
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.children}</div>
      <div class="actions">
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
        <button type="button" class="danger" onClick={props.onConfirm}>
          {props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
