/** Naming conventions of Kubernetes workloads. */

/** Deployment pod name -> service: the pod name less its last two dash segments (hash, id). */
export function serviceOfDeploymentPod(pod: string): string {
  const parts = pod.split('-');
  return parts.length > 2 ? parts.slice(0, -2).join('-') : pod;
}

/** StatefulSet-style pod name (`frontend-0`, `adservice2-1`) -> service (`frontend`). */
export function serviceOfOrdinalPod(pod: string): string {
  return pod.replace(/-\d+$/, '');
}
