package scaling

// DecisionAcknowledged is the virtual connector's readiness rule (Dynamo's
// scaling_decision_is_ready, reference §7.2): a new decision may be published when no
// decision was ever made (decisionID == -1) or the orchestrator has acknowledged the current
// one (scaledDecisionID >= decisionID). A missing or unparsable acknowledgement (nil) is not
// an acknowledgement.
func DecisionAcknowledged(decisionID int64, scaledDecisionID *int64) bool {
	if decisionID == -1 {
		return true
	}
	return scaledDecisionID != nil && *scaledDecisionID >= decisionID
}
