/* What a promotion says about itself, read by the queue and the promotion page. */

/* The approval group still short, as the approval gate says it ("risk: 0 of 1"). */
export function missingGroup(p) {
  const g = (p.gates || []).find((x) => x.kind === 'approval');
  const m = g && /;\s*([a-z0-9-]+: \d+ of \d+)/.exec(g.detail || '');
  return m ? m[1] : null;
}

export function approvalsOf(p) {
  const required = (p.policy && p.policy.approvals && p.policy.approvals.required) || 0;
  const given = (p.approvals || []).filter((a) => a.decision === 'approve').length;
  return { required, given, needed: Math.max(0, required - given) };
}

export function promoTitle(p) {
  return p.model + ' v' + p.version + ' → ' + p.alias;
}
