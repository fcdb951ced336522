"""Contains all the data models used in inputs/outputs"""

from .api_key_response import ApiKeyResponse
from .batch_item import BatchItem
from .batch_request import BatchRequest
from .batch_response import BatchResponse
from .budget_inputs_response import BudgetInputsResponse
from .budget_request import BudgetRequest
from .budget_response import BudgetResponse
from .bundle_response import BundleResponse
from .caller_pool import CallerPool
from .code_bundle import CodeBundle
from .code_files import CodeFiles
from .code_files_files import CodeFilesFiles
from .console_session import ConsoleSession
from .control_arithmetic_instruction import ControlArithmeticInstruction
from .control_arithmetic_instruction_op import ControlArithmeticInstructionOp
from .control_batch_decision import ControlBatchDecision
from .control_batch_decision_batch import ControlBatchDecisionBatch
from .control_cmp import ControlCmp
from .control_condition import ControlCondition
from .control_emit_instruction import ControlEmitInstruction
from .control_emit_instruction_op import ControlEmitInstructionOp
from .control_imm_operand import ControlImmOperand
from .control_input_operand import ControlInputOperand
from .control_per_event_decision import ControlPerEventDecision
from .control_policy import ControlPolicy
from .control_policy_durability import ControlPolicyDurability
from .control_reduce import ControlReduce
from .control_reg_operand import ControlRegOperand
from .control_route import ControlRoute
from .control_select_instruction import ControlSelectInstruction
from .control_select_instruction_op import ControlSelectInstructionOp
from .control_set_route_instruction import ControlSetRouteInstruction
from .control_set_route_instruction_op import ControlSetRouteInstructionOp
from .control_stats_response import ControlStatsResponse
from .control_status_response import ControlStatusResponse
from .create_bundle_request import CreateBundleRequest
from .create_bundle_request_files import CreateBundleRequestFiles
from .create_job import CreateJob
from .create_job_env_type_0 import CreateJobEnvType0
from .create_key_request import CreateKeyRequest
from .create_session_request import CreateSessionRequest
from .created_key_response import CreatedKeyResponse
from .created_tenant_response import CreatedTenantResponse
from .deps import Deps
from .effect_response import EffectResponse
from .error_body import ErrorBody
from .error_code import ErrorCode
from .event_request import EventRequest
from .event_result import EventResult
from .events_response import EventsResponse
from .field_error import FieldError
from .gpu_amounts import GpuAmounts
from .gpu_sample_response import GpuSampleResponse
from .gpu_shares import GpuShares
from .health_response import HealthResponse
from .job_error import JobError
from .job_logs_response import JobLogsResponse
from .job_response import JobResponse
from .kind import Kind
from .leader_response import LeaderResponse
from .list_jobs_response import ListJobsResponse
from .list_policies_response import ListPoliciesResponse
from .list_pools_response import ListPoolsResponse
from .list_profiles_response import ListProfilesResponse
from .list_sessions_response import ListSessionsResponse
from .mechanism_response import MechanismResponse
from .p_star_bounds import PStarBounds
from .pod_counts import PodCounts
from .pod_event_response import PodEventResponse
from .pod_event_response_reason import PodEventResponseReason
from .pod_events_response import PodEventsResponse
from .policy_response import PolicyResponse
from .policy_route_response import PolicyRouteResponse
from .pool_budget import PoolBudget
from .pool_gpus import PoolGpus
from .pool_history_response import PoolHistoryResponse
from .pool_objective import PoolObjective
from .pool_pods import PoolPods
from .pool_response import PoolResponse
from .profile_response import ProfileResponse
from .profile_response_node_selector import ProfileResponseNodeSelector
from .profile_usage import ProfileUsage
from .route_ref import RouteRef
from .server_sent_event import ServerSentEvent
from .session_response import SessionResponse
from .sign_in_request import SignInRequest
from .source import Source
from .start_class import StartClass
from .start_objective import StartObjective
from .state import State
from .stats_coverage import StatsCoverage
from .tenant_pool import TenantPool
from .tenant_request import TenantRequest
from .tenant_response import TenantResponse
from .timing import Timing
from .topology import Topology
from .usage_response import UsageResponse
from .usage_response_by_source import UsageResponseBySource
from .usage_response_by_state import UsageResponseByState

__all__ = (
    "ApiKeyResponse",
    "BatchItem",
    "BatchRequest",
    "BatchResponse",
    "BudgetInputsResponse",
    "BudgetRequest",
    "BudgetResponse",
    "BundleResponse",
    "CallerPool",
    "CodeBundle",
    "CodeFiles",
    "CodeFilesFiles",
    "ConsoleSession",
    "ControlArithmeticInstruction",
    "ControlArithmeticInstructionOp",
    "ControlBatchDecision",
    "ControlBatchDecisionBatch",
    "ControlCmp",
    "ControlCondition",
    "ControlEmitInstruction",
    "ControlEmitInstructionOp",
    "ControlImmOperand",
    "ControlInputOperand",
    "ControlPerEventDecision",
    "ControlPolicy",
    "ControlPolicyDurability",
    "ControlReduce",
    "ControlRegOperand",
    "ControlRoute",
    "ControlSelectInstruction",
    "ControlSelectInstructionOp",
    "ControlSetRouteInstruction",
    "ControlSetRouteInstructionOp",
    "ControlStatsResponse",
    "ControlStatusResponse",
    "CreateBundleRequest",
    "CreateBundleRequestFiles",
    "CreatedKeyResponse",
    "CreatedTenantResponse",
    "CreateJob",
    "CreateJobEnvType0",
    "CreateKeyRequest",
    "CreateSessionRequest",
    "Deps",
    "EffectResponse",
    "ErrorBody",
    "ErrorCode",
    "EventRequest",
    "EventResult",
    "EventsResponse",
    "FieldError",
    "GpuAmounts",
    "GpuSampleResponse",
    "GpuShares",
    "HealthResponse",
    "JobError",
    "JobLogsResponse",
    "JobResponse",
    "Kind",
    "LeaderResponse",
    "ListJobsResponse",
    "ListPoliciesResponse",
    "ListPoolsResponse",
    "ListProfilesResponse",
    "ListSessionsResponse",
    "MechanismResponse",
    "PodCounts",
    "PodEventResponse",
    "PodEventResponseReason",
    "PodEventsResponse",
    "PolicyResponse",
    "PolicyRouteResponse",
    "PoolBudget",
    "PoolGpus",
    "PoolHistoryResponse",
    "PoolObjective",
    "PoolPods",
    "PoolResponse",
    "ProfileResponse",
    "ProfileResponseNodeSelector",
    "ProfileUsage",
    "PStarBounds",
    "RouteRef",
    "ServerSentEvent",
    "SessionResponse",
    "SignInRequest",
    "Source",
    "StartClass",
    "StartObjective",
    "State",
    "StatsCoverage",
    "TenantPool",
    "TenantRequest",
    "TenantResponse",
    "Timing",
    "Topology",
    "UsageResponse",
    "UsageResponseBySource",
    "UsageResponseByState",
)
